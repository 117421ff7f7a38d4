-- pgTAP tests for sql/functions/075_workflow_waiting.sql: No lost wake-up: a signal that came while the step ran wakes it as it parks.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);

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
-- No lost wake-up: a signal that came while the step ran wakes it as it parks
-------------------------------------------------------------------------------------------------
-- The step saw s1 (and did not take it); s2 came while it ran; it parks having seen s1: woken at once.
DO $d$ BEGIN PERFORM pg_temp.start('lw', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_s1', pg_temp.signal('lw', 'paid') -> 'signal_id');
SELECT is(pg_temp.read('lw', 'lw'), 1, 'setup: the gate step begins having seen s1');
SELECT pg_temp.mark('lw_s2', pg_temp.signal('lw', 'paid') -> 'signal_id');
SELECT pg_temp.mark('lw_a', to_jsonb(pg_temp.cur('lw')));
SELECT pg_temp.mark('lw_msg', to_jsonb((pg_temp.att(pg_temp.cur('lw'))).msg_id));
SELECT pg_temp.mark_ev('lw_ev');
SELECT is(pg_temp.park('lw', pg_temp.id('lw_s1')), '{"ok": true, "status": "ready", "workflow_class": "t_wfw_lw", "step": "capture"}'::jsonb,
          'park having seen only an older signal than a pending one: answers ready (woken at once)');
SELECT results_eq(
    $$SELECT w.status, s.step_id, s.status, s.outcome, s.waiting_since IS NOT NULL, s.msg_id <> pg_temp.id('lw_msg'),
             (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('lw')$$,
    $$VALUES ('ready'::text, pg_temp.id('lw_a'), 'scheduled'::text, 'park'::text, true, true, true)$$,
    'no lost wake-up: the attempt is scheduled again with a new visible message');
SELECT is(pg_temp.has_msg('t_wfw_lw', pg_temp.id('lw_msg'), 'a'), true, 'no lost wake-up: the old message is archived');
SELECT results_eq($$SELECT event, actor, details - 'deadline' FROM pg_temp.evs('lw', 'lw_ev')$$,
                  $$VALUES ('step_waiting'::text, NULL::text, '{"step": "capture", "verb": "park", "wait_for": "paid"}'::jsonb),
                           ('step_woken', NULL, jsonb_build_object('step', 'capture', 'signal_id', pg_temp.id('lw_s2')))$$,
                  'no lost wake-up: step_waiting then step_woken naming the newer signal');
SELECT is(pg_temp.signals('lw'), 'paid:pending,paid:pending', 'no lost wake-up: both signals still pending');

-- With NULL seen (it saw nothing) a pending signal of its name wakes it too.
DO $d$ BEGIN PERFORM pg_temp.go('lw_null', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_null_s', pg_temp.signal('lw_null', 'paid') -> 'signal_id');
SELECT is(pg_temp.park('lw_null') ->> 'status', 'ready', 'park having seen nothing, a pending signal of its name: woken');

-- Having seen every pending signal of its name: it waits; a newer signal of another name does not wake it.
DO $d$ BEGIN PERFORM pg_temp.start('lw_seen', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_seen_s1', pg_temp.signal('lw_seen', 'paid') -> 'signal_id');
SELECT is(pg_temp.read('lw_seen', 'lw_seen'), 1, 'setup: the gate step begins');
SELECT pg_temp.mark('lw_seen_s2', pg_temp.signal('lw_seen', 'paid') -> 'signal_id');
SELECT pg_temp.mark('lw_seen_s3', pg_temp.signal('lw_seen', 'other') -> 'signal_id');
SELECT pg_temp.mark_ev('lw_seen_ev');
SELECT is(pg_temp.park('lw_seen', pg_temp.id('lw_seen_s2')) ->> 'status', 'waiting',
          'park having seen every pending signal of its name (a newer one of another name pending): waiting');
SELECT results_eq($$SELECT w.status, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    WHERE w.workflow_id = pg_temp.run('lw_seen')$$,
                  $$VALUES ('waiting'::text, 'waiting'::text)$$, '... the run and the attempt wait');
SELECT is(pg_temp.events('lw_seen', pg_temp.id('lw_seen_ev')), 'step_waiting', '... only step_waiting, no step_woken');
SELECT is(pg_temp.park('lw_seen') ->> 'code', 'stale', '... and it cannot park twice');

-- Having seen more than there is (a newer id than every pending one): it waits.
DO $d$ BEGIN PERFORM pg_temp.go('lw_ahead', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_ahead_s', pg_temp.signal('lw_ahead', 'paid') -> 'signal_id');
SELECT is(pg_temp.park('lw_ahead', pg_temp.id('lw_ahead_s') + 1000) ->> 'status', 'waiting',
          'park with seen_signal_id above every pending one: waiting');

SELECT * FROM finish();
ROLLBACK;
