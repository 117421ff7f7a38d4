-- pgTAP tests for sql/functions/020_batches.sql: batch_finish_if_done on unknown batches; batch_member_done refusals and a gone batch.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- batch_finish_if_done on unknown batches; batch_member_done refusals and a gone batch.
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.batch_finish_if_done('00000000-0000-0000-0000-000000000000'), false, 'batch_finish_if_done: an unknown batch is false');
SELECT is(pgbus.batch_finish_if_done(NULL), false, 'batch_finish_if_done: NULL is false');
SELECT is(pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'completed'), false,
          'batch_member_done: a batch that is gone counts nothing (false)');
SELECT is(pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'discarded'), false,
          'batch_member_done: a discard for a batch that is gone is false');

INSERT INTO t_b VALUES ('refuse', pg_temp.open('refuse'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}']::jsonb[], NULL, pg_temp.b('refuse'))),
          1::bigint, 'refuse: one job enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('refuse')), false, 'refuse: close with a pending member');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'failed')$$, pg_temp.b('refuse')), '22023',
                 'pgbus: batch member outcome is completed or discarded, got failed',
                 'batch_member_done: refuses outcome "failed"');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'Completed')$$, pg_temp.b('refuse')), '22023', NULL,
                 'batch_member_done: outcomes are case-sensitive');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, '')$$, pg_temp.b('refuse')), '22023', NULL,
                 'batch_member_done: refuses an empty outcome');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, NULL)$$, pg_temp.b('refuse')), '22023', NULL,
                 'batch_member_done: refuses a NULL outcome');
SELECT throws_ok($$SELECT pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'bogus')$$, '22023', NULL,
                 'batch_member_done: refuses a bad outcome even for a batch that is gone');
SELECT is(pg_temp.counts('refuse'), '1 total, 0 completed, 0 discarded, processing', 'batch_member_done: refused outcomes count nothing');

SELECT * FROM finish();
ROLLBACK;
