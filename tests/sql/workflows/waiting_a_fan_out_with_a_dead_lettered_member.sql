-- pgTAP tests for sql/functions/075_workflow_waiting.sql: A fan-out with a dead-lettered member: on_batch_failure.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(24);

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
-- A fan-out with a dead-lettered member: on_batch_failure
-------------------------------------------------------------------------------------------------
-- pause (the default).
DO $d$ BEGIN PERFORM pg_temp.fan_out('fb_pause', pg_temp.fan(), 3); END $d$;
SELECT pg_temp.mark('fb_pause_a', to_jsonb(pg_temp.cur('fb_pause')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_pause')).batch_id, 'completed', 2), false, 'setup: two members completed');
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_pause')).batch_id, 'discarded'), true, 'setup: one dead-lettered');
SELECT pg_temp.mark_ev('fb_pause_ev');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fb_pause_a'), 'pgbus'),
          '{"ok": true, "status": "paused", "workflow_class": "t_wfw_fb_pause", "step": "notify"}'::jsonb,
          'on_batch_failure pause (default): answers paused');
SELECT results_eq($$SELECT status, outcome, error_class, error FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fb_pause_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text, 'pgbus.workflow.FanOutFailed'::text,
                            '{"class": "pgbus.workflow.FanOutFailed", "message": "1 of 3 jobs dead-lettered"}'::jsonb)$$,
                  'on_batch_failure pause: the attempt failed with FanOutFailed, "1 of 3 jobs dead-lettered"');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fb_pause')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'on_batch_failure pause: the run is paused (error)');
SELECT results_eq($$SELECT event, actor, reason, details FROM pg_temp.evs('fb_pause', 'fb_pause_ev')$$,
                  $$VALUES ('fan_out_finished'::text, 'pgbus'::text, NULL::text,
                            jsonb_build_object('step', 'notify', 'batch_id', (pg_temp.batch('fb_pause')).batch_id, 'jobs', 3, 'dead_lettered', 1)),
                           ('step_failed', 'pgbus', 'fan-out failed',
                            '{"step": "notify", "attempt": 1, "verb": "pause", "error_class": "pgbus.workflow.FanOutFailed"}'),
                           ('paused', 'pgbus', 'fan-out failed', '{"error_class": "pgbus.workflow.FanOutFailed"}')$$,
                  'on_batch_failure pause: events fan_out_finished (1 dead-lettered), step_failed, paused');
SELECT is((SELECT reason FROM pgbus.workflow_stuck() WHERE workflow_id = pg_temp.run('fb_pause')), 'paused_error',
          'on_batch_failure pause: workflow_stuck says paused_error');
-- Resumed: the step again, attempt 2, which parks on a fresh batch.
SELECT is(pg_temp.cmd('fb_pause', 'resume') ->> 'status', 'ready', 'resume of a failed fan-out: ready');
SELECT is(pg_temp.attempts('fb_pause'), 'notify#1:failed,notify#2:scheduled', 'resume of a failed fan-out: the step again');
SELECT is(pg_temp.read('fb_pause2', 'fb_pause'), 1, 'setup: attempt 2 begins');
SELECT is(pg_temp.end_step(pg_temp.cur('fb_pause'), 'park', fan_out => pg_temp.jobs('fb_pause', 2)) ->> 'status', 'waiting',
          'attempt 2 parks on a new batch');
SELECT isnt((pg_temp.batch('fb_pause')).batch_id, (pg_temp.att(pg_temp.id('fb_pause_a'))).batch_id, '... a fresh batch, not the first');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fb_pause')::text), 2::bigint,
          '... two batches for the run in all');

-- cancel.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fb_cancel', pg_temp.fan('cancel'), 3); END $d$;
SELECT pg_temp.mark('fb_cancel_a', to_jsonb(pg_temp.cur('fb_cancel')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_cancel')).batch_id, 'discarded', 3), true, 'setup: three dead-lettered');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fb_cancel_a')) ->> 'status', 'cancelled', 'on_batch_failure cancel: answers cancelled');
SELECT results_eq($$SELECT status, pause_cause, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fb_cancel')$$,
                  $$VALUES ('cancelled'::text, NULL::text, true)$$, 'on_batch_failure cancel: the run is cancelled');
SELECT results_eq($$SELECT outcome, error_class, error ->> 'message' FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fb_cancel_a')$$,
                  $$VALUES ('cancel'::text, 'pgbus.workflow.FanOutFailed'::text, '3 of 3 jobs dead-lettered'::text)$$,
                  'on_batch_failure cancel: the attempt ended with cancel and FanOutFailed recorded');
SELECT results_eq($$SELECT event, actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('fb_cancel') AND event = 'cancelled'$$,
                  $$VALUES ('cancelled'::text, 'pgbus'::text, 'fan-out failed'::text)$$, 'on_batch_failure cancel: a cancelled event');

-- skip.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fb_skip', pg_temp.fan('skip'), 3); END $d$;
SELECT pg_temp.mark('fb_skip_a', to_jsonb(pg_temp.cur('fb_skip')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_skip')).batch_id, 'completed', 2), false, 'setup: two completed');
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_skip')).batch_id, 'discarded'), true, 'setup: one dead-lettered');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fb_skip_a')) ->> 'status', 'ready', 'on_batch_failure skip: answers ready');
SELECT is(pg_temp.attempts('fb_skip') LIKE 'notify#1:%,ship#1:scheduled', true, 'on_batch_failure skip: the run goes on to the next step');
SELECT results_eq($$SELECT outcome, error_class FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fb_skip_a')$$,
                  $$VALUES ('skip'::text, 'pgbus.workflow.FanOutFailed'::text)$$,
                  'on_batch_failure skip: the attempt ended with skip and FanOutFailed recorded');
SELECT is((pg_temp.att(pg_temp.id('fb_skip_a'))).status, 'failed',
          'on_batch_failure skip: the attempt carries an error, so it is failed (its outcome says skip)');

SELECT * FROM finish();
ROLLBACK;
