-- pgTAP tests for sql/functions/030_job_outcomes.sql: record_job_stat.
-- (Split from job_outcomes.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);

-- Scratch space (dropped by the ROLLBACK).
CREATE TEMP TABLE t_ids (name text PRIMARY KEY, id bigint);
CREATE TEMP TABLE t_msg (name text PRIMARY KEY, message jsonb);

-- Enqueues one job and remembers its msg_id under `name`.
CREATE FUNCTION pg_temp.enq(name text, queue text, job_class text, batch uuid DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $f$
DECLARE
    id bigint;
BEGIN
    SELECT e INTO id FROM pgbus.enqueue(queue, job_class, ARRAY[jsonb_build_object('args', jsonb_build_array(name))],
                                        NULL, batch) e;
    INSERT INTO t_ids VALUES (enq.name, id);
    RETURN id;
END;
$f$;
CREATE FUNCTION pg_temp.id(name text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT id FROM t_ids WHERE t_ids.name = $1
$f$;
-- Simulates a worker reading the next visible message of the queue (read_ct + 1).
CREATE FUNCTION pg_temp.read1(queue text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT msg_id FROM pgmq.read(queue, 30, 1)
$f$;
-- Makes a message visible again (its retry delay is over).
CREATE FUNCTION pg_temp.due(queue text, msg_id bigint) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pgmq.set_vt(queue, msg_id, clock_timestamp() - interval '1 second');
END;
$f$;
-- A message's row in a queue table ('q') or archive ('a'), or NULL.
CREATE FUNCTION pg_temp.msg(queue text, msg_id bigint, kind text DEFAULT 'q') RETURNS pgmq.message_record
LANGUAGE plpgsql AS $f$
DECLARE
    m pgmq.message_record;
BEGIN
    IF to_regclass(format('pgmq.%I', kind || '_' || queue)) IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT msg_id, read_ct, enqueued_at, NULL::timestamptz, vt, message, headers FROM pgmq.%I WHERE msg_id = $1',
                   kind || '_' || queue) INTO m USING msg_id;
    RETURN m;
END;
$f$;
-- The dead letter of queue/msg_id in <queue>_dlq, or NULL.
CREATE FUNCTION pg_temp.dl(queue text, msg_id bigint) RETURNS pgmq.message_record
LANGUAGE plpgsql AS $f$
DECLARE
    m pgmq.message_record;
BEGIN
    IF to_regclass(format('pgmq.%I', 'q_' || queue || '_dlq')) IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format($q$SELECT msg_id, read_ct, enqueued_at, NULL::timestamptz, vt, message, headers FROM pgmq.%I
                      WHERE headers -> 'pgbus_dead_letter' ->> 'msg_id' = $1::text$q$, 'q_' || queue || '_dlq')
        INTO m USING msg_id;
    RETURN m;
END;
$f$;
CREATE FUNCTION pg_temp.stats(queue text) RETURNS text LANGUAGE sql AS $f$
    SELECT coalesce(string_agg(format('%s %s %s %s %s', job_class, status, duration_ms,
                                      coalesce(enqueue_latency_ms::text, '-'), retry_count), '; ' ORDER BY id), '')
    FROM pgbus.job_stats WHERE queue_name = queue
$f$;
CREATE FUNCTION pg_temp.failures(queue text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT count(*) FROM pgbus.job_failures WHERE queue_name = queue
$f$;
-- Runs a query returning one value and gives it as text, or the error it raised as 'ERROR: ...'.
CREATE FUNCTION pg_temp.eval(query text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    result text;
BEGIN
    EXECUTE query INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR: ' || SQLERRM;
END;
$f$;

-------------------------------------------------------------------------------------------------
-- record_job_stat
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat1', '{"job_class": "Stat"}', 'success', 12, 34, 2)$$,
                'record_job_stat: records a stat');
SELECT results_eq(
    $$SELECT job_class, queue_name, status, duration_ms, enqueue_latency_ms, retry_count, created_at
      FROM pgbus.job_stats WHERE queue_name = 't_outcomes_stat1'$$,
    $$VALUES ('Stat'::text, 't_outcomes_stat1'::text, 'success'::text, 12, 34::bigint, 2, now())$$,
    'record_job_stat: the row holds class, queue, status, duration, latency, retries, now()');
SELECT lives_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat2', '{"args": []}', 'failed', -5, NULL, -1)$$,
                'record_job_stat: records a stat without a job class, negative numbers');
SELECT is(pg_temp.stats('t_outcomes_stat2'), '(unknown) failed 0 - 0',
          'record_job_stat: no job_class gives (unknown); negative duration and retries become 0; no latency stays NULL');
SELECT lives_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat3', NULL, 'dead_lettered', NULL, NULL, NULL)$$,
                'record_job_stat: records a stat with NULL message and numbers');
SELECT is(pg_temp.stats('t_outcomes_stat3'), '(unknown) dead_lettered 0 - 0', 'record_job_stat: NULLs become (unknown) and 0');
SELECT throws_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat4', '{"job_class": "Stat"}', 'exploded', 1, 1, 0)$$,
                 '23514', NULL, 'record_job_stat: refuses an unknown status');

SELECT * FROM finish();
ROLLBACK;
