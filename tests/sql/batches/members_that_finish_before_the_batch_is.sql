-- pgTAP tests for sql/functions/020_batches.sql: Members that finish before the batch is closed: counted, and the batch finishes at close.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(9);

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
