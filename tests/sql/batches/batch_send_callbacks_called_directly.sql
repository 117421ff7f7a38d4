-- pgTAP tests for sql/functions/020_batches.sql: batch_send_callbacks, called directly with a batch row.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);

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
-- batch_send_callbacks, called directly with a batch row.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('direct_ok', pg_temp.open('direct_ok'));
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_ok')),
                'batch_send_callbacks: runs on a batch row');
SELECT is(pg_temp.sent_all('direct_ok'), ARRAY[1, 1, 0]::bigint[],
          'batch_send_callbacks: nothing discarded sends on_complete and on_success');
INSERT INTO t_b VALUES ('direct_bad', pg_temp.open('direct_bad'));
UPDATE pgbus.batches SET total_jobs = 3, completed_jobs = 1, discarded_jobs = 2 WHERE batch_id = pg_temp.b('direct_bad');
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_bad')),
                'batch_send_callbacks: runs on a batch row with discards');
SELECT is(pg_temp.sent_all('direct_bad'), ARRAY[1, 0, 1]::bigint[],
          'batch_send_callbacks: something discarded sends on_complete and on_discard');
INSERT INTO t_b VALUES ('direct_some', pgbus.batch_open('p', '{"case": "direct_some"}', NULL,
                                                        '{"job_class": "OnSuccess", "queue": "t_batches_ok"}'));
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_some')),
                'batch_send_callbacks: runs on a batch row with only on_success');
SELECT is(pg_temp.sent_all('direct_some'), ARRAY[0, 1, 0]::bigint[], 'batch_send_callbacks: NULL callbacks are skipped');
SELECT results_eq(
    $$SELECT message ->> 'job_class', message -> 'args', message -> 'kwargs'
      FROM pgmq.q_t_batches_ok WHERE message -> 'args' -> 0 ->> 'case' = 'direct_some'$$,
    $$VALUES ('OnSuccess'::text, '[{"case": "direct_some"}]'::jsonb, '{}'::jsonb)$$,
    'batch_send_callbacks: the job has the callback''s class and the properties as its single arg');

SELECT * FROM finish();
ROLLBACK;
