-- pgTAP tests for sql/functions/020_batches.sql: Members complete: counters, exactly-once finish, on_complete + on_success.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(19);

-- Scratch space (dropped by the ROLLBACK).
CREATE TEMP TABLE t_b (name text PRIMARY KEY, id uuid);
CREATE TEMP TABLE t_n (name text PRIMARY KEY, n bigint);

-- Callback queues, one per kind of callback, so what was sent can be counted. Every batch below
-- has a distinct "case" in its properties; callbacks carry the properties as their single arg.
DO $$
BEGIN
    PERFORM pgbus.ensure_queue('t_batches_done');
    PERFORM pgbus.ensure_queue('t_batches_ok');
    PERFORM pgbus.ensure_queue('t_batches_bad');
END;
$$;

CREATE FUNCTION pg_temp.sent(queue text, kase text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
    n bigint;
BEGIN
    EXECUTE format($q$SELECT count(*) FROM pgmq.%I WHERE message -> 'args' -> 0 ->> 'case' = $1$q$, 'q_' || queue)
        INTO n USING kase;
    RETURN n;
END;
$f$;
-- Callbacks sent for a case, as on_complete / on_success / on_discard counts.
CREATE FUNCTION pg_temp.sent_all(kase text) RETURNS bigint[] LANGUAGE sql AS $f$
    SELECT ARRAY[pg_temp.sent('t_batches_done', kase), pg_temp.sent('t_batches_ok', kase),
                 pg_temp.sent('t_batches_bad', kase)]
$f$;
CREATE FUNCTION pg_temp.open(kase text) RETURNS uuid LANGUAGE sql AS $f$
    SELECT pgbus.batch_open('case ' || kase, jsonb_build_object('case', kase),
                            '{"job_class": "OnComplete", "queue": "t_batches_done"}',
                            '{"job_class": "OnSuccess", "queue": "t_batches_ok"}',
                            '{"job_class": "OnDiscard", "queue": "t_batches_bad"}')
$f$;
CREATE FUNCTION pg_temp.b(kase text) RETURNS uuid LANGUAGE sql AS $f$
    SELECT id FROM t_b WHERE name = kase
$f$;
CREATE FUNCTION pg_temp.counts(kase text) RETURNS text LANGUAGE sql AS $f$
    SELECT format('%s total, %s completed, %s discarded, %s', total_jobs, completed_jobs, discarded_jobs, status)
    FROM pgbus.batches WHERE batch_id = pg_temp.b(kase)
$f$;

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
