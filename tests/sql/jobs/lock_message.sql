-- pgTAP tests for sql/functions/030_job_outcomes.sql: lock_message.
-- (Split from job_outcomes.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);

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
-- lock_message
-------------------------------------------------------------------------------------------------
SELECT isnt(pg_temp.enq('lock', 't_outcomes_lock', 'Locked'), NULL, 'lock_message setup: a job enqueued');
SELECT is(pg_temp.read1('t_outcomes_lock'), pg_temp.id('lock'), 'lock_message setup: the job read once');
SELECT results_eq(
    $$SELECT (m).msg_id, (m).read_ct, (m).message ->> 'job_class', (m).message -> 'args', (m).headers,
             (m).vt > clock_timestamp(), (m).last_read_at IS NOT NULL
      FROM (SELECT pgbus.lock_message('t_outcomes_lock', pg_temp.id('lock')) AS m) s$$,
    $$VALUES (pg_temp.id('lock'), 1, 'Locked'::text, '["lock"]'::jsonb, NULL::jsonb, true, true)$$,
    'lock_message: returns the message row (msg_id, read_ct, message, headers, vt, last_read_at)');
SELECT ok(pgbus.lock_message('t_outcomes_lock', 999999) IS NULL, 'lock_message: a message that is gone is NULL');
SELECT ok((pgbus.lock_message('t_outcomes_lock', 999999)).msg_id IS NULL, 'lock_message: a gone message has a NULL msg_id');
SELECT ok((pgbus.lock_message('t_outcomes_lock', NULL)).msg_id IS NULL, 'lock_message: a NULL msg_id is NULL');

SELECT * FROM finish();
ROLLBACK;
