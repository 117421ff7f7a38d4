-- pgTAP tests for sql/functions/075_workflow_waiting.sql: workflow_stuck: waiting_overdue.
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
-- workflow_stuck: waiting_overdue
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('st_old', pg_temp.gate(NULL)); PERFORM pg_temp.park('st_old'); END $d$;
UPDATE pgbus.workflow_steps SET waiting_since = now() - interval '8 days' WHERE step_id = pg_temp.cur('st_old');
DO $d$ BEGIN PERFORM pg_temp.go('st_new', pg_temp.gate(NULL)); PERFORM pg_temp.park('st_new'); END $d$;
UPDATE pgbus.workflow_steps SET waiting_since = now() - interval '2 hours' WHERE step_id = pg_temp.cur('st_new');
SELECT results_eq($$SELECT workflow_class, step_name, reason, error_class, since FROM pgbus.workflow_stuck()
                    WHERE workflow_id IN (pg_temp.run('st_old'), pg_temp.run('st_new'))$$,
                  $$VALUES ('t_wfw_st_old'::text, 'capture'::text, 'waiting_overdue'::text, NULL::text, now() - interval '8 days')$$,
                  'workflow_stuck: a run waiting past 7 days is waiting_overdue since it began waiting; one waiting 2 hours is not stuck');
SELECT set_eq($$SELECT workflow_class, reason FROM pgbus.workflow_stuck(waiting_threshold => interval '1 hour')
                WHERE workflow_id IN (pg_temp.run('st_old'), pg_temp.run('st_new'))$$,
              $$VALUES ('t_wfw_st_old', 'waiting_overdue'), ('t_wfw_st_new', 'waiting_overdue')$$,
              'workflow_stuck: with a 1-hour threshold both are waiting_overdue');
SELECT is((SELECT count(*) FROM pgbus.workflow_stuck(waiting_threshold => interval '9 days') WHERE workflow_id = pg_temp.run('st_old')), 0::bigint,
          'workflow_stuck: under a 9-day threshold the 8-day wait is not stuck');

-------------------------------------------------------------------------------------------------
-- workflow_sweep: wait timeouts and the lost-callback repair (from no runs at all, so that its
-- answer is exact; undone by the ROLLBACK)
-------------------------------------------------------------------------------------------------
DELETE FROM pgbus.workflows;
-- Past their deadline: one per on_timeout, one with none (pause), a fan-out (cancel).
DO $d$
BEGIN
    PERFORM pg_temp.go('sw_pause', pg_temp.gate(60, 'pause'));   PERFORM pg_temp.park('sw_pause');
    PERFORM pg_temp.go('sw_default', pg_temp.gate(60));          PERFORM pg_temp.park('sw_default');
    PERFORM pg_temp.go('sw_cancel', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('sw_cancel');
    PERFORM pg_temp.go('sw_skip', pg_temp.gate(60, 'skip'));     PERFORM pg_temp.park('sw_skip');
    PERFORM pg_temp.go('sw_run', pg_temp.gate(60, 'run'));       PERFORM pg_temp.park('sw_run');
    PERFORM pg_temp.fan_out('sw_fan', pg_temp.fan(NULL, 60, 'cancel'), 2);
    -- Not to time out: its deadline is ahead; paused (its deadline forced into the past).
    PERFORM pg_temp.go('sw_future', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('sw_future');
    PERFORM pg_temp.go('sw_paused', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('sw_paused');
    PERFORM pg_temp.cmd('sw_paused', 'pause');
END
$d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() - interval '1 minute'
WHERE workflow_id IN (SELECT pg_temp.run(n) FROM unnest(ARRAY['sw_pause', 'sw_default', 'sw_cancel', 'sw_skip', 'sw_run', 'sw_fan', 'sw_paused']) n);
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '1 minute' WHERE workflow_id = pg_temp.run('sw_future');
-- Fan-outs: finished 10 minutes ago, its callback lost (to repair); finished just now (its
-- callback still due); still processing (members left); its batch row gone (to pause, on_batch_failure skip notwithstanding).
DO $d$
BEGIN
    PERFORM pg_temp.fan_out('rp_lost', pg_temp.fan(), 2);
    PERFORM pgbus.batch_member_done((pg_temp.batch('rp_lost')).batch_id, 'completed', 2);
    PERFORM pg_temp.fan_out('rp_recent', pg_temp.fan(), 1);
    PERFORM pgbus.batch_member_done((pg_temp.batch('rp_recent')).batch_id, 'completed');
    PERFORM pg_temp.fan_out('rp_processing', pg_temp.fan(), 2);
    PERFORM pgbus.batch_member_done((pg_temp.batch('rp_processing')).batch_id, 'completed');
    PERFORM pg_temp.fan_out('rp_gone', pg_temp.fan('skip'), 2);
END
$d$;
UPDATE pgbus.batches SET finished_at = now() - interval '10 minutes' WHERE batch_id = (pg_temp.batch('rp_lost')).batch_id;
UPDATE pgbus.batches SET created_at = now() - interval '1 day' WHERE batch_id = (pg_temp.batch('rp_processing')).batch_id;
SELECT pg_temp.mark('rp_gone_b', to_jsonb((pg_temp.batch('rp_gone')).batch_id));
DELETE FROM pgbus.batches WHERE batch_id = (pg_temp.batch('rp_gone')).batch_id;
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE status = 'waiting'), 11::bigint, 'setup: eleven waiting runs, one paused');
SELECT pg_temp.mark('sw_a', (SELECT jsonb_object_agg(n, pg_temp.cur(n)) FROM unnest(ARRAY['sw_pause', 'sw_run', 'sw_future', 'sw_paused', 'rp_lost']) n));
SELECT pg_temp.mark('sw_run_msg', to_jsonb((pg_temp.att(pg_temp.cur('sw_run'))).msg_id));
SELECT pg_temp.mark_ev('sw_ev');

SELECT pg_temp.mark('sweep', pgbus.workflow_sweep());
SELECT set_eq(
    $$SELECT e - 'was' - 'error_class' FROM jsonb_array_elements(pg_temp.marked('sweep') -> 'timed_out') e$$,
    $$SELECT jsonb_build_object('workflow_id', pg_temp.run(n), 'workflow_class', pg_temp.cls(n), 'step', s, 'action', a, 'status', st)
      FROM (VALUES ('sw_pause', 'capture', 'pause', 'paused'), ('sw_default', 'capture', 'pause', 'paused'),
                   ('sw_cancel', 'capture', 'cancel', 'cancelled'), ('sw_skip', 'capture', 'skip', 'ready'),
                   ('sw_run', 'capture', 'run', 'ready'), ('sw_fan', 'notify', 'cancel', 'cancelled')) v(n, s, a, st)$$,
    'workflow_sweep: "timed_out" lists every run past its deadline with its step, on_timeout and new status');
SELECT is(pg_temp.marked('sweep') -> 'resolved', '2'::jsonb, 'workflow_sweep: "resolved" counts the lost callback and the gone batch');
SELECT results_eq($$SELECT pg_temp.marked('sweep') -> 'stalled', pg_temp.marked('sweep') -> 'resent', pg_temp.marked('sweep') -> 'deleted'$$,
                  $$VALUES ('[]'::jsonb, '0'::jsonb, '0'::jsonb)$$, 'workflow_sweep: nothing stalled, resent or deleted');

-- Timeouts.
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, s.outcome, s.error_class, s.error ->> 'message'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id IN (pg_temp.run('sw_pause'), pg_temp.run('sw_default')) ORDER BY w.workflow_class$$,
    $$VALUES ('paused'::text, 'error'::text, 'failed'::text, 'pause'::text, 'pgbus.workflow.WaitTimedOut'::text, 'step capture waited longer than 00:01:00'::text),
             ('paused', 'error', 'failed', 'pause', 'pgbus.workflow.WaitTimedOut', 'step capture waited longer than 00:01:00')$$,
    'workflow_sweep: on_timeout pause (explicit or by default): the attempt failed with WaitTimedOut, the run paused (error)');
SELECT results_eq($$SELECT event, actor, reason, details - 'waiting_since' FROM pg_temp.evs('sw_pause', 'sw_ev')$$,
                  $$VALUES ('wait_timed_out'::text, 'pgbus'::text, NULL::text, '{"step": "capture", "action": "pause", "wait_for": "paid"}'::jsonb),
                           ('step_failed', 'pgbus', 'wait timed out', '{"step": "capture", "attempt": 1, "verb": "pause", "error_class": "pgbus.workflow.WaitTimedOut"}'),
                           ('paused', 'pgbus', 'wait timed out', '{"error_class": "pgbus.workflow.WaitTimedOut"}')$$,
                  'workflow_sweep: timeout events by pgbus');
SELECT results_eq($$SELECT w.status, s.status, s.outcome FROM pgbus.workflows w JOIN pgbus.workflow_steps s USING (workflow_id)
                    WHERE w.workflow_id = pg_temp.run('sw_cancel')$$,
                  $$VALUES ('cancelled'::text, 'cancelled'::text, 'cancel'::text)$$, 'workflow_sweep: on_timeout cancel: the run and its attempt cancelled');
SELECT is(pg_temp.attempts('sw_skip'), 'capture#1:skipped,ship#1:scheduled', 'workflow_sweep: on_timeout skip: skipped, the next step scheduled');
SELECT results_eq(
    $$SELECT w.status, s.step_id, s.status, s.timed_out, s.msg_id <> pg_temp.id('sw_run_msg'), (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('sw_run')$$,
    $$VALUES ('ready'::text, (pg_temp.marked('sw_a') ->> 'sw_run')::bigint, 'scheduled'::text, true, true, true)$$,
    'workflow_sweep: on_timeout run: the same attempt scheduled with timed_out and a new visible message');
SELECT is(pg_temp.events('sw_run', pg_temp.id('sw_ev')), 'wait_timed_out,step_woken', 'workflow_sweep: on_timeout run: wait_timed_out, step_woken');
SELECT results_eq($$SELECT w.status, s.status, s.outcome FROM pgbus.workflows w JOIN pgbus.workflow_steps s USING (workflow_id)
                    WHERE w.workflow_id = pg_temp.run('sw_fan')$$,
                  $$VALUES ('cancelled'::text, 'cancelled'::text, 'cancel'::text)$$, 'workflow_sweep: a fan-out past its wait_timeout times out too');
SELECT is((pg_temp.ev('sw_fan', 'wait_timed_out')).details ->> 'batch_id', (pg_temp.att((pg_temp.ev('sw_fan', 'wait_timed_out')).step_id)).batch_id::text,
          '... its wait_timed_out names the batch');
SELECT results_eq(
    $$SELECT w.status, s.status, s.wait_deadline > now() FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_future')$$,
    $$VALUES ('waiting'::text, 'waiting'::text, true)$$, 'workflow_sweep: a wait before its deadline is left alone');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_paused')$$,
    $$VALUES ('paused'::text, 'manual'::text, 'waiting'::text)$$, 'workflow_sweep: a paused run is never timed out (even past a deadline)');
SELECT is(pg_temp.events('sw_future', pg_temp.id('sw_ev')) || pg_temp.events('sw_paused', pg_temp.id('sw_ev')), '',
          'workflow_sweep: ... no events for either');

-- Lost-callback repair.
SELECT is(pg_temp.attempts('rp_lost'), 'notify#1:completed,ship#1:scheduled', 'workflow_sweep: a fan-out whose batch finished long ago is resolved');
SELECT results_eq($$SELECT event, actor, reason, details ->> 'step' FROM pg_temp.evs('rp_lost', 'sw_ev')$$,
                  $$VALUES ('fan_out_repaired'::text, 'pgbus'::text, 'its batch callback was lost'::text, 'notify'::text),
                           ('fan_out_finished', 'pgbus', NULL, 'notify'), ('step_completed', 'pgbus', NULL, 'notify'),
                           ('step_scheduled', 'pgbus', NULL, 'ship')$$,
                  '... events fan_out_repaired, fan_out_finished, step_completed, step_scheduled by pgbus');
SELECT results_eq($$SELECT w.status, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    WHERE w.workflow_id IN (pg_temp.run('rp_recent'), pg_temp.run('rp_processing'))$$,
                  $$VALUES ('waiting'::text, 'waiting'::text), ('waiting', 'waiting')$$,
                  'workflow_sweep: a batch finished just now and one still processing are left alone');
SELECT is(pg_temp.events('rp_recent', pg_temp.id('sw_ev')) || pg_temp.events('rp_processing', pg_temp.id('sw_ev')), '', '... no events');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, s.outcome, s.error_class, s.error ->> 'message'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('rp_gone')$$,
    $$VALUES ('paused'::text, 'error'::text, 'failed'::text, 'pause'::text, 'pgbus.workflow.FanOutBatchGone'::text,
              'the batch of notify is gone: its outcome is unknown'::text)$$,
    'workflow_sweep: a fan-out whose batch row is gone is paused with FanOutBatchGone (on_batch_failure skip notwithstanding)');
SELECT is(pg_temp.events('rp_gone', pg_temp.id('sw_ev')), 'fan_out_repaired,step_failed,paused', '... events fan_out_repaired, step_failed, paused');

-- The gauges, and a second sweep.
SELECT set_eq(
    $$SELECT e ->> 'workflow_class' AS c, e ->> 'status' AS s, (e ->> 'count')::int AS n
      FROM jsonb_array_elements(pg_temp.marked('sweep') -> 'runs') e$$,
    $$VALUES ('t_wfw_sw_pause', 'paused', 1), ('t_wfw_sw_default', 'paused', 1), ('t_wfw_sw_skip', 'ready', 1), ('t_wfw_sw_run', 'ready', 1),
             ('t_wfw_sw_future', 'waiting', 1), ('t_wfw_sw_paused', 'paused', 1), ('t_wfw_rp_lost', 'ready', 1),
             ('t_wfw_rp_recent', 'waiting', 1), ('t_wfw_rp_processing', 'waiting', 1), ('t_wfw_rp_gone', 'paused', 1)$$,
    'workflow_sweep: "runs" counts the runs after its work by class and status');
SELECT is(pgbus.workflow_sweep() - 'runs' - 'stuck', '{"stalled": [], "timed_out": [], "resolved": 0, "resent": 0, "deleted": 0,
                                                     "failures_forgotten": 0, "moved": [], "failed": []}'::jsonb,
          'workflow_sweep: a second sweep times out and resolves nothing more');
-- The callback of the one finished just now arrives later: resolved as usual.
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.cur('rp_recent')) ->> 'status', 'ready', 'the late callback of a batch finished just now resolves it');
-- A long wait is waiting_overdue in the sweep's gauge.
UPDATE pgbus.workflow_steps SET waiting_since = now() - interval '8 days' WHERE step_id = pg_temp.cur('sw_future');
SELECT is((SELECT e FROM jsonb_array_elements(pgbus.workflow_sweep() -> 'stuck') e WHERE e ->> 'workflow_class' = 't_wfw_sw_future'),
          '{"workflow_class": "t_wfw_sw_future", "reason": "waiting_overdue", "count": 1}'::jsonb,
          'workflow_sweep: "stuck" counts a run waiting 8 days as waiting_overdue');

SELECT * FROM finish();
ROLLBACK;
