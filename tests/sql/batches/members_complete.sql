-- pgTAP tests for sql/functions/020_batches.sql: Members complete: counters, exactly-once finish, on_complete + on_success.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(19);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- Members complete: counters, exactly-once finish, on_complete + on_success.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('members', pg_temp.open('members'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('members'))), 3::bigint, 'members: three jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('members')), false, 'batch_close: a batch with pending members does not finish (false)');
SELECT results_eq(
    $$SELECT status, finished_at FROM pgbus.batches WHERE batch_id = pg_temp.b('members')$$,
    $$VALUES ('processing'::text, NULL::timestamptz)$$,
    'batch_close: a batch with pending members is processing');
SELECT is(pg_temp.sent_all('members'), ARRAY[0, 0, 0]::bigint[], 'batch_close: no callbacks while members are pending');
SELECT throws_ok(format('SELECT pgbus.batch_close(%L)', pg_temp.b('members')), '55000', NULL,
                 'batch_close: refuses a batch that is processing');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('members')), false, 'batch_finish_if_done: false while members are pending');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), false, 'batch_member_done: first of three, not finished');
SELECT is(pg_temp.counts('members'), '3 total, 1 completed, 0 discarded, processing', 'batch_member_done: counts a completed member');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), false, 'batch_member_done: second of three, not finished');
SELECT is(pg_temp.sent_all('members'), ARRAY[0, 0, 0]::bigint[], 'batch_member_done: no callbacks before the last member');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), true, 'batch_member_done: the last member finishes the batch (true)');
SELECT is(pg_temp.counts('members'), '3 total, 3 completed, 0 discarded, finished', 'batch_member_done: all completed, finished');
SELECT is((SELECT finished_at FROM pgbus.batches WHERE batch_id = pg_temp.b('members')), now(), 'batch_member_done: finished_at set');
SELECT is(pg_temp.sent_all('members'), ARRAY[1, 1, 0]::bigint[],
          'batch finished with every member completed: on_complete and on_success, not on_discard');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('members')), false, 'batch_finish_if_done: true only once');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), false, 'batch_member_done: a finished batch counts nothing more (false)');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'discarded'), false, 'batch_member_done: a finished batch counts no discards (false)');
SELECT is(pg_temp.counts('members'), '3 total, 3 completed, 0 discarded, finished', 'batch_member_done: finished counters unchanged');
SELECT is(pg_temp.sent_all('members'), ARRAY[1, 1, 0]::bigint[], 'exactly-once: callbacks still sent once');

SELECT * FROM finish();
ROLLBACK;
