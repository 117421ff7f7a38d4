-- pgTAP tests for sql/functions/020_batches.sql: Members that finish before the batch is closed: counted, and the batch finishes at close.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(9);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- Members that finish before the batch is closed: counted, and the batch finishes at close.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('early', pg_temp.open('early'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL, pg_temp.b('early'))),
          2::bigint, 'early: two jobs enqueued in the batch');
SELECT is(pgbus.batch_member_done(pg_temp.b('early'), 'completed'), false, 'early: a member done while open does not finish it');
SELECT is(pgbus.batch_member_done(pg_temp.b('early'), 'completed'), false, 'early: the last member done while open does not finish it');
SELECT is(pg_temp.counts('early'), '2 total, 2 completed, 0 discarded, open', 'early: counted while open; still open');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('early')), false, 'batch_finish_if_done: an open batch does not finish');
SELECT is(pg_temp.sent_all('early'), ARRAY[0, 0, 0]::bigint[], 'early: no callbacks while open');
SELECT is(pgbus.batch_close(pg_temp.b('early')), true, 'batch_close: a batch whose members all finished already finishes at close');
SELECT is(pg_temp.counts('early'), '2 total, 2 completed, 0 discarded, finished', 'early: finished at close');
SELECT is(pg_temp.sent_all('early'), ARRAY[1, 1, 0]::bigint[], 'early: on_complete and on_success sent once');

SELECT * FROM finish();
ROLLBACK;
