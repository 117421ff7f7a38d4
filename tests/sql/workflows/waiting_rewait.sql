-- pgTAP tests for sql/functions/075_workflow_waiting.sql: rewait: a woken step that takes nothing parks again, keeping its deadline.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(11);

-- Every scenario has its own class and queue ('t_wfw_<name>'), so that reading one scenario's
-- step begins no other.
CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfw_' || $1 $f$;
\ir ../include/workflow_helpers.psql
-- Registers t_wfw_<name> and starts a run of it, remembered as `name`.
CREATE FUNCTION pg_temp.start(name text, steps text) RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name), actor => 'tester');
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;
-- Reads the queue t_wfw_<queue> the way a worker does; keeps the rows under `tag`; how many
-- steps it began (a fan-out's BatchFinishedJob, read from the same queue, is kept but not
-- counted); NULL, with a warning, when read_jobs raised.
CREATE FUNCTION pg_temp.read(tag text, queue text) RETURNS integer LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO t_reads
    SELECT read.tag, r.* FROM pgbus.read_jobs(ARRAY[pg_temp.cls(queue)], 30, 10, 'host:1', 'rev') r;
    RETURN (SELECT count(*) FROM t_reads WHERE t_reads.tag = read.tag AND message ->> 'job_class' = pgbus.step_job_class());
EXCEPTION WHEN OTHERS THEN
    -- Shown on stderr; the read is undone and the tests that follow go on (and fail).
    RAISE WARNING 'pg_temp.read(%, %): read_jobs raised %: %', tag, queue, SQLSTATE, SQLERRM;
    RETURN NULL;
END;
$f$;
-- The context the read tagged `tag` began (the step's row of it).
CREATE FUNCTION pg_temp.ctx(tag text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT context FROM t_reads WHERE t_reads.tag = $1 AND message ->> 'job_class' = pgbus.step_job_class()
$f$;
-- A run's events after the mark `mark` (an event id kept with pg_temp.mark), with who, why and
-- what, in order; for results_eq.
CREATE FUNCTION pg_temp.evs(name text, mark text)
RETURNS TABLE (event text, step_id bigint, actor text, reason text, details jsonb) LANGUAGE sql AS $f$
    SELECT e.event, e.step_id, e.actor, e.reason, e.details FROM pgbus.workflow_events e
    WHERE e.workflow_id = pg_temp.run($1) AND e.event_id > (pg_temp.marked($2))::bigint ORDER BY e.event_id
$f$;
-- All messages of a queue ('q') or its archive ('a'), as their bodies in msg_id order.
CREATE FUNCTION pg_temp.queue_messages(queue text, kind text DEFAULT 'q') RETURNS SETOF jsonb LANGUAGE plpgsql AS $f$
BEGIN
    IF to_regclass(format('pgmq.%I', kind || '_' || queue)) IS NOT NULL THEN
        RETURN QUERY EXECUTE format('SELECT message FROM pgmq.%I ORDER BY msg_id', kind || '_' || queue);
    END IF;
END;
$f$;
-- workflow_end_step with the waiting-step arguments, with an error it raises answered as
-- {"raised": SQLSTATE, "message": ...} so that the tests after it still run (the failed call's
-- changes are undone).
CREATE FUNCTION pg_temp.end_step(step_id bigint, verb text, output jsonb DEFAULT NULL, error jsonb DEFAULT NULL,
                                 reason text DEFAULT NULL, signal_id bigint DEFAULT NULL, fan_out jsonb DEFAULT NULL,
                                 seen_signal_id bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $f$
BEGIN
    RETURN pgbus.workflow_end_step(step_id, verb, output, error, NULL, reason, signal_id, fan_out, seen_signal_id);
EXCEPTION WHEN OTHERS THEN
    RETURN jsonb_build_object('raised', SQLSTATE, 'message', SQLERRM);
END;
$f$;
-- The current step of run `name` parks at its gate (having seen the signals up to `seen`).
CREATE FUNCTION pg_temp.park(name text, seen bigint DEFAULT NULL, reason text DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT pg_temp.end_step(pg_temp.cur($1), 'park', reason => $3, seen_signal_id => $2)
$f$;
-- Delivers signal `signal` to run `name` through workflow_command 'signal'.
CREATE FUNCTION pg_temp.signal(name text, signal text, payload jsonb DEFAULT NULL, key text DEFAULT NULL,
                               actor text DEFAULT 'app', reason text DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT pg_temp.cmd($1, 'signal', $5, $6,
                       jsonb_strip_nulls(jsonb_build_object('name', $2, 'payload', $3, 'idempotency_key', $4)))
$f$;
-- A signal's row.
CREATE FUNCTION pg_temp.sig(signal_id bigint) RETURNS pgbus.workflow_signals LANGUAGE sql AS $f$
    SELECT * FROM pgbus.workflow_signals WHERE workflow_signals.signal_id = $1
$f$;
-- A run's signals as 'name:status,...' in signal_id order.
CREATE FUNCTION pg_temp.signals(name text) RETURNS text LANGUAGE sql AS $f$
    SELECT coalesce(string_agg(format('%s:%s', g.name, g.status), ',' ORDER BY g.signal_id), '')
    FROM pgbus.workflow_signals g WHERE g.workflow_id = pg_temp.run($1)
$f$;
-- `n` fan-out jobs for run `name`: class app:Notify with args [1], [2], ... to queue t_wfw_<name>_m.
CREATE FUNCTION pg_temp.jobs(name text, n integer) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT coalesce(jsonb_agg(jsonb_build_object('queue', pg_temp.cls($1) || '_m', 'job_class', 'app:Notify',
                                                 'arguments', jsonb_build_object('args', jsonb_build_array(i)),
                                                 'run_at', NULL) ORDER BY i), '[]')
    FROM generate_series(1, $2) i
$f$;
-- The batch the current attempt of run `name` waits on.
CREATE FUNCTION pg_temp.batch(name text) RETURNS pgbus.batches LANGUAGE sql AS $f$
    SELECT b.* FROM pgbus.batches b WHERE b.batch_id = (pg_temp.att(pg_temp.cur($1))).batch_id
$f$;
-- Starts run `name` (a fan-out step first) and parks it on a batch of `n` jobs.
CREATE FUNCTION pg_temp.fan_out(name text, steps text, n integer) RETURNS jsonb LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_temp.go(name, steps);
    RETURN pg_temp.end_step(pg_temp.cur(name), 'park', fan_out => pg_temp.jobs(name, n));
END;
$f$;
-- Everything that belongs to a run, to show that something changed nothing: its row, its
-- attempts, its signals, its event count.
CREATE FUNCTION pg_temp.state(name text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT jsonb_build_object(
        'run', (SELECT to_jsonb(w) FROM pgbus.workflows w WHERE w.workflow_id = pg_temp.run($1)),
        'steps', (SELECT coalesce(jsonb_agg(to_jsonb(ws) ORDER BY ws.step_id), '[]')
                  FROM pgbus.workflow_steps ws WHERE ws.workflow_id = pg_temp.run($1)),
        'signals', (SELECT coalesce(jsonb_agg(to_jsonb(g) ORDER BY g.signal_id), '[]')
                    FROM pgbus.workflow_signals g WHERE g.workflow_id = pg_temp.run($1)),
        'events', (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = pg_temp.run($1)))
$f$;
-- Marks the latest event id as `name`.
CREATE FUNCTION pg_temp.mark_ev(name text) RETURNS void LANGUAGE sql AS $f$
    SELECT pg_temp.mark($1, to_jsonb(pg_temp.last_event_id()))
$f$;
CREATE FUNCTION pg_temp.id(name text) RETURNS bigint LANGUAGE sql AS $f$ SELECT (pg_temp.marked($1))::bigint $f$;

-- The step definitions used below.
CREATE FUNCTION pg_temp.gate(wait_timeout integer DEFAULT 3600, on_timeout text DEFAULT NULL, wait_for text DEFAULT 'paid')
RETURNS text LANGUAGE sql AS $f$
    SELECT jsonb_build_array(
        jsonb_strip_nulls(jsonb_build_object('name', 'capture', 'wait_for', $3, 'wait_timeout', $1, 'on_timeout', $2)),
        jsonb_build_object('name', 'ship'))::text
$f$;
CREATE FUNCTION pg_temp.fan(on_batch_failure text DEFAULT NULL, wait_timeout integer DEFAULT NULL, on_timeout text DEFAULT NULL)
RETURNS text LANGUAGE sql AS $f$
    SELECT jsonb_build_array(
        jsonb_strip_nulls(jsonb_build_object('name', 'notify', 'fan_out', true, 'on_batch_failure', $1,
                                             'wait_timeout', $2, 'on_timeout', $3)),
        jsonb_build_object('name', 'ship'))::text
$f$;

-------------------------------------------------------------------------------------------------
-- rewait: a woken step that takes nothing parks again, keeping its deadline
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('rewait', pg_temp.gate(3600)); PERFORM pg_temp.park('rewait'); END $d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '17 minutes', waiting_since = now() - interval '43 minutes'
WHERE step_id = pg_temp.cur('rewait');
SELECT pg_temp.mark('rewait_a', to_jsonb(pg_temp.cur('rewait')));
SELECT pg_temp.mark('rewait_s1', pg_temp.signal('rewait', 'paid', '{"amount": 1}') -> 'signal_id');
SELECT is(pg_temp.read('rewait_woken', 'rewait'), 1, 'rewait: the woken step is read again');
SELECT results_eq(
    $$SELECT (c ->> 'step_id')::bigint, (c ->> 'attempt')::int, c ->> 'wait_for', (c ->> 'waited')::boolean,
             (c ->> 'timed_out')::boolean, jsonb_array_length(c -> 'signals'), (c #>> '{signals,0,signal_id}')::bigint
      FROM (SELECT pg_temp.ctx('rewait_woken') AS c) x$$,
    $$VALUES (pg_temp.id('rewait_a'), 1, 'paid'::text, true, false, 1, pg_temp.id('rewait_s1'))$$,
    'begin_step of a woken gate step: the same attempt, waited true, the pending signal in its context');
SELECT pg_temp.mark_ev('rewait_ev');
SELECT is(pg_temp.end_step(pg_temp.id('rewait_a'), 'rewait', seen_signal_id => pg_temp.id('rewait_s1')) ->> 'status', 'waiting',
          'rewait having seen the pending signal: waiting');
SELECT results_eq(
    $$SELECT status, outcome, wait_deadline = now() + interval '17 minutes', waiting_since = now() - interval '43 minutes', wait_remaining
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('rewait_a')$$,
    $$VALUES ('waiting'::text, 'rewait'::text, true, true, NULL::interval)$$,
    'rewait: the attempt waits again with its original deadline and waiting_since');
SELECT results_eq($$SELECT event, details FROM pg_temp.evs('rewait', 'rewait_ev')$$,
                  $$VALUES ('step_waiting'::text, jsonb_build_object('step', 'capture', 'verb', 'rewait', 'wait_for', 'paid',
                                                                     'deadline', now() + interval '17 minutes'))$$,
                  'rewait: a step_waiting event (verb rewait, the original deadline); no wake');
SELECT is(pg_temp.signals('rewait'), 'paid:pending', 'rewait: the signal it did not take stays pending');
SELECT is((pg_temp.w('rewait')).status, 'waiting', 'rewait: the run waits');

-- A woken step that rewaits while its run is paused: the clock stops with what its kept deadline leaves.
DO $d$ BEGIN PERFORM pg_temp.go('rewait_paused', pg_temp.gate(3600)); PERFORM pg_temp.park('rewait_paused'); END $d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '12 minutes' WHERE step_id = pg_temp.cur('rewait_paused');
SELECT pg_temp.mark('rewait_paused_s', pg_temp.signal('rewait_paused', 'paid') -> 'signal_id');
SELECT is(pg_temp.read('rewait_paused_woken', 'rewait_paused'), 1, 'setup: the woken step begins');
SELECT is(pg_temp.cmd('rewait_paused', 'pause') ->> 'status', 'paused', 'setup: paused while it runs');
SELECT is(pg_temp.end_step(pg_temp.cur('rewait_paused'), 'rewait', seen_signal_id => pg_temp.id('rewait_paused_s')) ->> 'status', 'paused',
          'rewait on a paused run: paused');
SELECT results_eq(
    $$SELECT status, outcome, wait_deadline, wait_remaining BETWEEN interval '12 minutes' - (clock_timestamp() - now()) AND interval '12 minutes'
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('rewait_paused')$$,
    $$VALUES ('waiting'::text, 'rewait'::text, NULL::timestamptz, true)$$,
    'rewait on a paused run: waiting, no deadline, what the kept deadline left in wait_remaining');

SELECT * FROM finish();
ROLLBACK;
