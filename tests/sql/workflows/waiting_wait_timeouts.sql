-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Wait timeouts: workflow_expire_wait applies on_timeout.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(27);

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
-- Wait timeouts: workflow_expire_wait applies on_timeout
-------------------------------------------------------------------------------------------------
-- pause: WaitTimedOut recorded, the run paused; a late signal stays pending.
DO $d$ BEGIN PERFORM pg_temp.go('ex_pause', pg_temp.gate(60, 'pause')); PERFORM pg_temp.park('ex_pause'); END $d$;
SELECT pg_temp.mark('ex_pause_a', to_jsonb(pg_temp.cur('ex_pause')));
SELECT pg_temp.mark_ev('ex_pause_ev');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_pause'), 'ops'), '{"ok": true, "status": "paused"}'::jsonb,
          'expire_wait, on_timeout pause: answers paused');
SELECT results_eq($$SELECT status, outcome, error, error_class, timed_out FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('ex_pause_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text,
                            '{"class": "pgbus.workflow.WaitTimedOut", "message": "step capture waited longer than 00:01:00"}'::jsonb,
                            'pgbus.workflow.WaitTimedOut'::text, false)$$,
                  'on_timeout pause: the attempt failed with WaitTimedOut');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('ex_pause')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'on_timeout pause: the run is paused (error)');
SELECT results_eq($$SELECT event, actor, reason, details - 'waiting_since' FROM pg_temp.evs('ex_pause', 'ex_pause_ev')$$,
                  $$VALUES ('wait_timed_out'::text, 'ops'::text, NULL::text, '{"step": "capture", "action": "pause", "wait_for": "paid"}'::jsonb),
                           ('step_failed', 'ops', 'wait timed out', '{"step": "capture", "attempt": 1, "verb": "pause", "error_class": "pgbus.workflow.WaitTimedOut"}'),
                           ('paused', 'ops', 'wait timed out', '{"error_class": "pgbus.workflow.WaitTimedOut"}')$$,
                  'on_timeout pause: events wait_timed_out, step_failed, paused by the caller');
SELECT is(((pg_temp.ev('ex_pause', 'wait_timed_out')).details ->> 'waiting_since')::timestamptz, (pg_temp.att(pg_temp.id('ex_pause_a'))).waiting_since,
          'wait_timed_out names when the step began waiting');
SELECT is(pg_temp.signal('ex_pause', 'paid') - 'signal_id', '{"ok": true, "status": "paused", "duplicate_delivery": false, "woke": false}'::jsonb,
          'a signal after the timeout: taken, wakes nothing');
SELECT is(pg_temp.signals('ex_pause'), 'paid:pending', '... it stays pending');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_pause')), '{"ok": false, "code": "not_allowed", "status": "paused"}'::jsonb,
          'expire_wait of a paused run: not_allowed');

-- run: the same attempt goes out again with timed_out.
DO $d$ BEGIN PERFORM pg_temp.go('ex_run', pg_temp.gate(60, 'run')); PERFORM pg_temp.park('ex_run'); END $d$;
SELECT pg_temp.mark('ex_run_a', to_jsonb(pg_temp.cur('ex_run')));
SELECT pg_temp.mark('ex_run_msg', to_jsonb((pg_temp.att(pg_temp.cur('ex_run'))).msg_id));
SELECT pg_temp.mark_ev('ex_run_ev');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_run')), '{"ok": true, "status": "ready"}'::jsonb, 'expire_wait, on_timeout run: answers ready');
SELECT results_eq(
    $$SELECT w.status, s.step_id, s.status, s.timed_out, s.msg_id <> pg_temp.id('ex_run_msg'), (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('ex_run')$$,
    $$VALUES ('ready'::text, pg_temp.id('ex_run_a'), 'scheduled'::text, true, true, true)$$,
    'on_timeout run: the run ready, the same attempt scheduled with timed_out and a new visible message');
SELECT is(pg_temp.has_msg('t_wfw_ex_run', pg_temp.id('ex_run_msg'), 'a'), true, 'on_timeout run: the parked message stays archived');
SELECT results_eq($$SELECT event, actor, details - 'waiting_since' FROM pg_temp.evs('ex_run', 'ex_run_ev')$$,
                  $$VALUES ('wait_timed_out'::text, 'pgbus'::text, '{"step": "capture", "action": "run", "wait_for": "paid"}'::jsonb),
                           ('step_woken', 'pgbus', '{"step": "capture", "timed_out": true}')$$,
                  'on_timeout run: events wait_timed_out and step_woken (timed_out), by pgbus by default');
SELECT is(pg_temp.read('ex_run2', 'ex_run'), 1, 'on_timeout run: the step is read again');
SELECT results_eq($$SELECT (pg_temp.ctx('ex_run2') ->> 'timed_out')::boolean, (pg_temp.ctx('ex_run2') ->> 'waited')::boolean,
                           (pg_temp.ctx('ex_run2') ->> 'step_id')::bigint$$,
                  $$VALUES (true, true, pg_temp.id('ex_run_a'))$$, 'on_timeout run: its context says timed_out and waited');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_run')), '{"ok": false, "code": "not_allowed", "status": "running"}'::jsonb,
          'expire_wait of a running run: not_allowed');
SELECT is(pgbus.workflow_expire_wait(gen_random_uuid()), '{"ok": false, "code": "not_found"}'::jsonb, 'expire_wait of an unknown run: not_found');

-- Woken by its timeout, then paused before it ran and resumed: the step should still run timed out.
DO $d$ BEGIN PERFORM pg_temp.go('ex_run_paused', pg_temp.gate(60, 'run')); PERFORM pg_temp.park('ex_run_paused'); END $d$;
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_run_paused')) ->> 'status', 'ready', 'setup: woken by its timeout');
SELECT is(pg_temp.cmd('ex_run_paused', 'pause') ->> 'status', 'paused', 'setup: paused before the woken step ran');
SELECT is(pg_temp.cmd('ex_run_paused', 'resume') ->> 'status', 'ready', 'setup: resumed');
SELECT is(pg_temp.read('ex_run_paused2', 'ex_run_paused'), 1, 'setup: the step begins');
SELECT is(pg_temp.ctx('ex_run_paused2') -> 'timed_out', 'true'::jsonb,
          'on_timeout run, paused and resumed before the step ran: its context still says timed_out');

-- cancel and skip.
DO $d$ BEGIN PERFORM pg_temp.go('ex_cancel', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('ex_cancel'); END $d$;
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_cancel')), '{"ok": true, "status": "cancelled"}'::jsonb, 'expire_wait, on_timeout cancel: cancelled');
SELECT results_eq($$SELECT status, outcome, error FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('ex_cancel')$$,
                  $$VALUES ('cancelled'::text, 'cancel'::text, NULL::jsonb)$$, 'on_timeout cancel: the attempt is cancelled, no error');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('ex_cancel')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'on_timeout cancel: the run is cancelled');
DO $d$ BEGIN PERFORM pg_temp.go('ex_skip', pg_temp.gate(60, 'skip')); PERFORM pg_temp.park('ex_skip'); END $d$;
SELECT pg_temp.mark_ev('ex_skip_ev');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_skip')), '{"ok": true, "status": "ready"}'::jsonb, 'expire_wait, on_timeout skip: ready');
SELECT is(pg_temp.attempts('ex_skip'), 'capture#1:skipped,ship#1:scheduled', 'on_timeout skip: the attempt skipped, the next step scheduled');
SELECT is(pg_temp.events('ex_skip', pg_temp.id('ex_skip_ev')), 'wait_timed_out,step_skipped,step_scheduled',
          'on_timeout skip: events wait_timed_out, step_skipped, step_scheduled');

SELECT * FROM finish();
ROLLBACK;
