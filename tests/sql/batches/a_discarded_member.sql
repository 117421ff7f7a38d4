-- pgTAP tests for sql/functions/020_batches.sql: A discarded member: on_complete + on_discard, not on_success.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- A discarded member: on_complete + on_discard, not on_success.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('discard', pg_temp.open('discard'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('discard'))), 2::bigint, 'discard: two jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('discard')), false, 'discard: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('discard'), 'discarded'), false, 'batch_member_done: a discarded member, not finished');
SELECT is(pg_temp.counts('discard'), '2 total, 0 completed, 1 discarded, processing', 'batch_member_done: counts a discarded member');
SELECT is(pgbus.batch_member_done(pg_temp.b('discard'), 'completed'), true, 'batch_member_done: the last member finishes the batch');
SELECT is(pg_temp.counts('discard'), '2 total, 1 completed, 1 discarded, finished', 'discard: counters at finish');
SELECT is(pg_temp.sent_all('discard'), ARRAY[1, 0, 1]::bigint[],
          'batch finished with a discarded member: on_complete and on_discard, not on_success');
SELECT is((SELECT message -> 'args' FROM pgmq.q_t_batches_bad WHERE message -> 'args' -> 0 ->> 'case' = 'discard'),
          '[{"case": "discard"}]'::jsonb, 'discard: on_discard carries the batch properties');

INSERT INTO t_b VALUES ('alldiscard', pg_temp.open('alldiscard'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}']::jsonb[], NULL, pg_temp.b('alldiscard'))),
          1::bigint, 'alldiscard: one job enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('alldiscard')), false, 'alldiscard: close with a pending member');
SELECT is(pgbus.batch_member_done(pg_temp.b('alldiscard'), 'discarded'), true, 'alldiscard: the discarded last member finishes it');
SELECT is(pg_temp.sent_all('alldiscard'), ARRAY[1, 0, 1]::bigint[], 'alldiscard: on_complete and on_discard, not on_success');

SELECT * FROM finish();
ROLLBACK;
