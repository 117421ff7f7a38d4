-- pgTAP tests for sql/functions/075_workflow_waiting.sql: A fan-out and its run paused, resumed, moved on.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(28);

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
-- A fan-out and its run paused, resumed, moved on
-------------------------------------------------------------------------------------------------
-- Paused while waiting on the batch: the batch's end is not_allowed; resume resolves it.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp', pg_temp.fan(), 2); END $d$;
SELECT pg_temp.mark('fp_a', to_jsonb(pg_temp.cur('fp')));
SELECT is(pg_temp.cmd('fp', 'pause', 'ops') ->> 'status', 'paused', 'setup: paused while waiting on its batch');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fp_a')), '{"ok": false, "code": "not_allowed", "status": "paused"}'::jsonb,
          'workflow_fan_out_finished while paused (members left): not_allowed');
SELECT is(pgbus.batch_member_done((pg_temp.batch('fp')).batch_id, 'completed', 2), true, 'setup: the batch finished while paused');
SELECT pg_temp.mark('fp_state', pg_temp.state('fp'));
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fp_a')), '{"ok": false, "code": "not_allowed", "status": "paused"}'::jsonb,
          'workflow_fan_out_finished while paused (batch finished): not_allowed');
SELECT is(pg_temp.state('fp'), pg_temp.marked('fp_state'), '... nothing changed');
SELECT pg_temp.mark_ev('fp_ev');
SELECT is(pg_temp.cmd('fp', 'resume', 'ops'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume of a run whose batch finished while paused: ready (resolved)');
SELECT is(pg_temp.attempts('fp'), 'notify#1:completed,ship#1:scheduled', '... the step completed and the next is scheduled');
SELECT is(pg_temp.events('fp', pg_temp.id('fp_ev')), 'resumed,fan_out_finished,step_completed,step_scheduled',
          '... events resumed, fan_out_finished, step_completed, step_scheduled');
SELECT is((pg_temp.ev('fp', 'fan_out_finished')).actor, 'ops', '... fan_out_finished by the operator who resumed');

-- Resumed while the batch still runs: it keeps waiting on that batch.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_running', pg_temp.fan(), 2); PERFORM pg_temp.cmd('fp_running', 'pause'); END $d$;
SELECT pg_temp.mark('fp_running_b', to_jsonb((pg_temp.batch('fp_running')).batch_id));
SELECT is(pg_temp.cmd('fp_running', 'resume') ->> 'status', 'waiting', 'resume while the batch still runs: waiting');
SELECT results_eq($$SELECT s.status, s.batch_id::text FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('fp_running')$$,
                  $$VALUES ('waiting'::text, pg_temp.marked('fp_running_b') #>> '{}')$$, '... on the same batch, the same attempt');

-- Paused while the batch finished with a dead-lettered member: resume applies on_batch_failure (pause).
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_failed', pg_temp.fan('pause'), 3); PERFORM pg_temp.cmd('fp_failed', 'pause'); END $d$;
SELECT pg_temp.mark('fp_failed_a', to_jsonb(pg_temp.cur('fp_failed')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fp_failed')).batch_id, 'discarded', 3), true, 'setup: the batch failed while paused');
SELECT pg_temp.mark('fp_failed_ans', pg_temp.cmd('fp_failed', 'resume'));
SELECT results_eq($$SELECT status, outcome, error ->> 'message' FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fp_failed_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text, '3 of 3 jobs dead-lettered'::text)$$,
                  'resume of a run whose batch failed meanwhile: the attempt failed with FanOutFailed');
SELECT is(pg_temp.marked('fp_failed_ans'), '{"ok": true, "status": "paused"}'::jsonb, '... resume answers paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fp_failed')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, '... the run is paused (error)');

-- The batch row deleted while paused: resume pauses it with FanOutBatchGone.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_gone', pg_temp.fan('skip'), 2); PERFORM pg_temp.cmd('fp_gone', 'pause'); END $d$;
SELECT pg_temp.mark('fp_gone_a', to_jsonb(pg_temp.cur('fp_gone')));
DELETE FROM pgbus.batches WHERE batch_id = (pg_temp.batch('fp_gone')).batch_id;
SELECT pg_temp.mark_ev('fp_gone_ev');
SELECT pg_temp.mark('fp_gone_ans', pg_temp.cmd('fp_gone', 'resume', 'ops'));
SELECT results_eq($$SELECT status, outcome, error FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fp_gone_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text,
                            '{"class": "pgbus.workflow.FanOutBatchGone", "message": "the batch of notify is gone: its outcome is unknown"}'::jsonb)$$,
                  'resume of a run whose batch row is gone: the attempt failed with FanOutBatchGone (pause, whatever on_batch_failure says)');
SELECT is(pg_temp.marked('fp_gone_ans'), '{"ok": true, "status": "paused"}'::jsonb, '... resume answers paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fp_gone')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, '... the run is paused (error)');
SELECT is(pg_temp.events('fp_gone', pg_temp.id('fp_gone_ev')), 'resumed,step_failed,paused', '... events resumed, step_failed, paused');

-- resume_at of a run paused while waiting: the waiting attempt is superseded; its batch's end is stale.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_ra', pg_temp.fan(), 1); PERFORM pg_temp.cmd('fp_ra', 'pause'); END $d$;
SELECT pg_temp.mark('fp_ra_a', to_jsonb(pg_temp.cur('fp_ra')));
SELECT is(pg_temp.cmd('fp_ra', 'resume_at', 'ops', NULL, '{"step": "notify"}') ->> 'status', 'ready', 'resume_at of a run paused while waiting: ready');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fp_ra_a')$$,
                  $$VALUES ('superseded'::text, true)$$, '... the waiting attempt is superseded');
SELECT is(pg_temp.attempts('fp_ra'), 'notify#1:superseded,notify#2:scheduled', '... a new attempt of the step is scheduled');
SELECT is(pgbus.batch_member_done((pg_temp.att(pg_temp.id('fp_ra_a'))).batch_id, 'completed'), true, 'setup: the old batch finishes');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fp_ra_a')), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'workflow_fan_out_finished of the superseded attempt: stale');
SELECT is(pg_temp.attempts('fp_ra'), 'notify#1:superseded,notify#2:scheduled', '... nothing changed');

-- The same for a gate.
DO $d$ BEGIN PERFORM pg_temp.go('ra_gate', pg_temp.gate()); PERFORM pg_temp.park('ra_gate'); PERFORM pg_temp.cmd('ra_gate', 'pause'); END $d$;
SELECT pg_temp.mark('ra_gate_a', to_jsonb(pg_temp.cur('ra_gate')));
SELECT is(pg_temp.cmd('ra_gate', 'resume_at', 'ops', NULL, '{"step": "ship"}') ->> 'status', 'ready', 'resume_at past a paused gate: ready');
SELECT is(pg_temp.attempts('ra_gate'), 'capture#1:superseded,ship#1:scheduled', '... the waiting gate attempt superseded, ship scheduled');
SELECT is(pg_temp.signal('ra_gate', 'paid') ->> 'woke', 'false', '... a signal for the old gate wakes nothing');

SELECT * FROM finish();
ROLLBACK;
