-- pgTAP tests for sql/functions/075_workflow_waiting.sql: skip and cancel from outside.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(18);

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
-- skip and cancel from outside
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('sk', pg_temp.gate()); PERFORM pg_temp.park('sk'); END $d$;
SELECT pg_temp.mark('sk_a', to_jsonb(pg_temp.cur('sk')));
SELECT pg_temp.mark_ev('sk_ev');
SELECT is(pg_temp.cmd('sk', 'skip', 'alice', 'not needed'), '{"ok": true, "status": "ready"}'::jsonb, 'skip of a waiting run: answers ok, ready');
SELECT results_eq($$SELECT status, outcome, error_class, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('sk_a')$$,
                  $$VALUES ('skipped'::text, 'skip'::text, NULL::text, true)$$, 'skip: the waiting attempt is skipped');
SELECT is(pg_temp.attempts('sk'), 'capture#1:skipped,ship#1:scheduled', 'skip: the next step is scheduled');
SELECT results_eq($$SELECT event, step_id, actor, reason, details - 'scheduled_at' FROM pg_temp.evs('sk', 'sk_ev')$$,
                  $$VALUES ('step_skipped'::text, pg_temp.id('sk_a'), 'alice'::text, 'not needed'::text,
                            '{"step": "capture", "attempt": 1, "verb": "skip"}'::jsonb),
                           ('step_scheduled', pg_temp.cur('sk'), 'alice', NULL, '{"step": "ship", "attempt": 1}')$$,
                  'skip: step_skipped with the actor and reason, then step_scheduled');
SELECT pg_temp.mark('sk_state', pg_temp.state('sk'));
SELECT is(pg_temp.cmd('sk', 'skip', 'alice'), '{"ok": false, "code": "not_allowed", "status": "ready"}'::jsonb,
          'skip of a run that no longer waits: not_allowed');
SELECT is(pg_temp.state('sk'), pg_temp.marked('sk_state'), '... nothing changed');
DO $d$ BEGIN PERFORM pg_temp.go('sk_running', pg_temp.gate()); END $d$;
SELECT is(pg_temp.cmd('sk_running', 'skip') ->> 'code', 'not_allowed', 'skip of a running run: not_allowed');
DO $d$ BEGIN PERFORM pg_temp.go('sk_paused', pg_temp.gate()); PERFORM pg_temp.park('sk_paused'); PERFORM pg_temp.cmd('sk_paused', 'pause'); END $d$;
SELECT is(pg_temp.cmd('sk_paused', 'skip') ->> 'code', 'not_allowed', 'skip of a run paused while waiting: not_allowed');
-- Without an actor the skip is the operator's; a skipped gate that had claimed a signal consumes it.
DO $d$ BEGIN PERFORM pg_temp.fan_out('sk_fan', pg_temp.fan(), 2); END $d$;
SELECT is(pg_temp.cmd('sk_fan', 'skip') ->> 'status', 'ready', 'skip of a run waiting on a batch: ready');
SELECT is((pg_temp.ev('sk_fan', 'step_skipped')).actor, 'operator', '... step_skipped by "operator" when no actor is given');
SELECT is(pgbus.batch_member_done((pg_temp.att((pg_temp.ev('sk_fan', 'step_skipped')).step_id)).batch_id, 'completed', 2), true,
          'setup: the skipped step''s batch finishes');
SELECT is(pgbus.workflow_fan_out_finished((pg_temp.ev('sk_fan', 'step_skipped')).step_id) ->> 'code', 'stale', '... its end is stale');

DO $d$ BEGIN PERFORM pg_temp.go('cn', pg_temp.gate()); PERFORM pg_temp.park('cn'); END $d$;
SELECT pg_temp.mark('cn_a', to_jsonb(pg_temp.cur('cn')));
SELECT pg_temp.mark_ev('cn_ev');
SELECT is(pg_temp.cmd('cn', 'cancel', 'ops', 'order void'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel of a waiting run: answers cancelled');
SELECT results_eq($$SELECT status, outcome, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('cn_a')$$,
                  $$VALUES ('cancelled'::text, 'cancel'::text, true)$$, 'cancel of a waiting run: the waiting attempt is cancelled');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('cn')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'cancel of a waiting run: the run is cancelled');
SELECT results_eq($$SELECT event, step_id, actor, reason FROM pg_temp.evs('cn', 'cn_ev')$$,
                  $$VALUES ('cancelled'::text, NULL::bigint, 'ops'::text, 'order void'::text)$$, 'cancel of a waiting run: a cancelled event');
DO $d$ BEGIN PERFORM pg_temp.go('cn_paused', pg_temp.gate()); PERFORM pg_temp.park('cn_paused'); PERFORM pg_temp.cmd('cn_paused', 'pause'); END $d$;
SELECT is(pg_temp.cmd('cn_paused', 'cancel') ->> 'status', 'cancelled', 'cancel of a run paused while waiting: cancelled');
SELECT is(pg_temp.attempts('cn_paused'), 'capture#1:cancelled', '... its waiting attempt is cancelled');

SELECT * FROM finish();
ROLLBACK;
