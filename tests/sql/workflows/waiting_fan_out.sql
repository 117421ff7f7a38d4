-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Fan-out: park on one batch (workflow_end_step 'park' with fan_out).
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(39);

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
-- Fan-out: park on one batch (workflow_end_step 'park' with fan_out)
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('fo', pg_temp.fan()); END $d$;
SELECT pg_temp.mark('fo_a', to_jsonb(pg_temp.cur('fo')));
SELECT pg_temp.mark('fo_msg', to_jsonb((pg_temp.att(pg_temp.cur('fo'))).msg_id));
SELECT pg_temp.mark_ev('fo_ev');
SELECT is(pg_temp.end_step(pg_temp.cur('fo'), 'park', fan_out =>
              '[{"queue": "t_wfw_fo_m", "job_class": "app:Notify", "arguments": {"args": [1]}, "run_at": null},
                {"queue": "t_wfw_fo_m", "job_class": "app:Audit", "arguments": {"args": [2], "kwargs": {"k": "v"}}, "run_at": null},
                {"queue": "t_wfw_fo_m", "job_class": "app:Notify", "arguments": {"args": [3]}, "run_at": null}]'),
          '{"ok": true, "status": "waiting", "workflow_class": "t_wfw_fo", "step": "notify"}'::jsonb,
          'fan-out park: answers ok, waiting');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fo')::text), 1::bigint,
          'fan-out park: exactly one batch for the run');
SELECT pg_temp.mark('fo_b', to_jsonb((pg_temp.batch('fo')).batch_id));
SELECT results_eq(
    $$SELECT description, properties, on_complete, on_success, on_discard, total_jobs, completed_jobs, discarded_jobs, status
      FROM pgbus.batches WHERE batch_id = (pg_temp.marked('fo_b') #>> '{}')::uuid$$,
    $$VALUES ('t_wfw_fo#notify ' || pg_temp.run('fo'),
              jsonb_build_object('workflow_id', pg_temp.run('fo'), 'step_id', pg_temp.id('fo_a')),
              '{"job_class": "pgbus.workflow:BatchFinishedJob", "queue": "t_wfw_fo"}'::jsonb, NULL::jsonb, NULL::jsonb,
              3, 0, 0, 'processing'::text)$$,
    'fan-out park: the batch is described "Class#step workflow_id", names run and attempt, calls back BatchFinishedJob on the step''s queue, holds 3 jobs, closed');
SELECT results_eq(
    $$SELECT m ->> 'job_class', m -> 'args', m -> 'kwargs', m ->> 'batch_id', m ->> 'queue' FROM pg_temp.queue_messages('t_wfw_fo_m') m$$,
    $$VALUES ('app:Notify'::text, '[1]'::jsonb, '{}'::jsonb, pg_temp.marked('fo_b') #>> '{}', 't_wfw_fo_m'::text),
             ('app:Notify', '[3]', '{}', pg_temp.marked('fo_b') #>> '{}', 't_wfw_fo_m'),
             ('app:Audit', '[2]', '{"k": "v"}', pg_temp.marked('fo_b') #>> '{}', 't_wfw_fo_m')$$,
    'fan-out park: the members are enqueued with the batch_id and their arguments');
SELECT results_eq(
    $$SELECT status, outcome, batch_id::text, wait_for, pg_temp.recent(waiting_since), wait_deadline, wait_remaining
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fo_a')$$,
    $$VALUES ('waiting'::text, 'park'::text, pg_temp.marked('fo_b') #>> '{}', NULL::text, true, NULL::timestamptz, NULL::interval)$$,
    'fan-out park: the attempt waits on the batch (no gate, no deadline without wait_timeout)');
SELECT is((pg_temp.w('fo')).status, 'waiting', 'fan-out park: the run is waiting');
SELECT is(pg_temp.has_msg('t_wfw_fo', pg_temp.id('fo_msg'), 'a'), true, 'fan-out park: the step''s message is archived');
SELECT results_eq($$SELECT event, step_id, actor, details FROM pg_temp.evs('fo', 'fo_ev')$$,
                  $$VALUES ('fan_out_opened'::text, pg_temp.id('fo_a'), NULL::text,
                            jsonb_build_object('step', 'notify', 'batch_id', pg_temp.marked('fo_b') #>> '{}', 'jobs', 3)),
                           ('step_waiting', pg_temp.id('fo_a'), NULL,
                            jsonb_build_object('step', 'notify', 'verb', 'park', 'batch_id', pg_temp.marked('fo_b') #>> '{}'))$$,
                  'fan-out park: events fan_out_opened (3 jobs) and step_waiting (on the batch)');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('fo')), '{skip,signal,pause,cancel}'::text[],
          'workflow_available_actions of a run waiting on a batch: skip, signal, pause, cancel');
SELECT is(pg_temp.signal('fo', 'paid') ->> 'woke', 'false', 'a signal does not wake a step waiting on a batch');
-- workflow_fan_out_finished while members are left: running, nothing changes.
SELECT is(pgbus.batch_member_done((pg_temp.marked('fo_b') #>> '{}')::uuid, 'completed'), false, 'setup: one member completed');
SELECT pg_temp.mark('fo_state', pg_temp.state('fo'));
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fo_a')), '{"ok": false, "code": "running", "status": "waiting"}'::jsonb,
          'workflow_fan_out_finished with members left: running');
SELECT is(pg_temp.state('fo'), pg_temp.marked('fo_state'), '... nothing changed');
SELECT is(pgbus.workflow_fan_out_finished(-1), '{"ok": false, "code": "not_found"}'::jsonb, 'workflow_fan_out_finished of an unknown attempt: not_found');
-- Every member completed: the callback is enqueued; the step completes, the next is scheduled.
SELECT is(pgbus.batch_member_done((pg_temp.marked('fo_b') #>> '{}')::uuid, 'completed', 2), true, 'setup: the last two members completed');
SELECT results_eq($$SELECT m ->> 'job_class', m -> 'args' FROM pg_temp.queue_messages('t_wfw_fo') m$$,
                  $$VALUES ('pgbus.workflow:BatchFinishedJob'::text,
                            jsonb_build_array(jsonb_build_object('workflow_id', pg_temp.run('fo'), 'step_id', pg_temp.id('fo_a'))))$$,
                  'the finished batch sends BatchFinishedJob to the step''s queue with the batch''s properties');
SELECT pg_temp.mark_ev('fo_ev2');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fo_a')),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfw_fo", "step": "notify"}'::jsonb,
          'workflow_fan_out_finished after every member completed: ok, ready');
SELECT results_eq($$SELECT status, outcome, error_class, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fo_a')$$,
                  $$VALUES ('completed'::text, 'resolve'::text, NULL::text, true)$$, '... the step completed (resolve)');
SELECT is(pg_temp.attempts('fo'), 'notify#1:completed,ship#1:scheduled', '... the next step is scheduled');
SELECT is((pg_temp.w('fo')).status, 'ready', '... the run is ready');
SELECT results_eq($$SELECT event, actor, reason, details FROM pg_temp.evs('fo', 'fo_ev2')$$,
                  $$VALUES ('fan_out_finished'::text, 'pgbus'::text, NULL::text,
                            jsonb_build_object('step', 'notify', 'batch_id', pg_temp.marked('fo_b') #>> '{}', 'jobs', 3, 'dead_lettered', 0)),
                           ('step_completed', 'pgbus', NULL, '{"step": "notify", "attempt": 1, "verb": "resolve"}'),
                           ('step_scheduled', 'pgbus', NULL,
                            jsonb_build_object('step', 'ship', 'attempt', 1, 'scheduled_at', (pg_temp.att(pg_temp.cur('fo'))).scheduled_at))$$,
                  '... events fan_out_finished, step_completed, step_scheduled by the caller (pgbus)');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fo_a')), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'workflow_fan_out_finished a second time: stale');

-- An empty fan-out resolves at once.
DO $d$ BEGIN PERFORM pg_temp.go('fo_empty', pg_temp.fan()); END $d$;
SELECT pg_temp.mark('fo_empty_a', to_jsonb(pg_temp.cur('fo_empty')));
SELECT pg_temp.mark_ev('fo_empty_ev');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_empty'), 'park', fan_out => '[]'),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfw_fo_empty", "step": "notify"}'::jsonb,
          'an empty fan-out: answers ready at once');
SELECT results_eq($$SELECT s.status, s.outcome, b.total_jobs, b.status FROM pgbus.workflow_steps s JOIN pgbus.batches b USING (batch_id)
                    WHERE s.step_id = pg_temp.id('fo_empty_a')$$,
                  $$VALUES ('completed'::text, 'resolve'::text, 0, 'finished'::text)$$,
                  'an empty fan-out: the attempt completed (resolve) on an empty, finished batch');
SELECT is(pg_temp.attempts('fo_empty'), 'notify#1:completed,ship#1:scheduled', 'an empty fan-out: the next step is scheduled');
SELECT is((SELECT b.on_complete FROM pgbus.workflow_steps s JOIN pgbus.batches b USING (batch_id)
           WHERE s.step_id = pg_temp.id('fo_empty_a')), NULL, 'an empty fan-out: its batch has no callback');
SELECT is((SELECT count(*) FROM pg_temp.queue_messages('t_wfw_fo_empty') m
           WHERE m ->> 'job_class' = 'pgbus.workflow:BatchFinishedJob'), 0::bigint,
          'an empty fan-out: no BatchFinishedJob is sent');
SELECT is(pg_temp.events('fo_empty', pg_temp.id('fo_empty_ev')), 'fan_out_opened,step_waiting,fan_out_finished,step_completed,step_scheduled',
          'an empty fan-out: events opened, waiting, finished, completed, scheduled');

-- A refused park opens no batch: the run was cancelled while the step ran.
DO $d$ BEGIN PERFORM pg_temp.go('fo_refused', pg_temp.fan()); PERFORM pg_temp.cmd('fo_refused', 'cancel'); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('fo_refused'), 'park', fan_out => pg_temp.jobs('fo_refused', 2)),
          '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb, 'fan-out park on a cancelled run: not_allowed');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fo_refused')::text), 0::bigint,
          '... no batch opened');
SELECT is((SELECT count(*) FROM pg_temp.queue_messages('t_wfw_fo_refused_m')), 0::bigint, '... no member enqueued');
SELECT results_eq($$SELECT status, outcome, batch_id FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('fo_refused')$$,
                  $$VALUES ('superseded'::text, 'park'::text, NULL::uuid)$$, '... the attempt is superseded');

-- fan_out goes only with park; malformed jobs are refused.
DO $d$ BEGIN PERFORM pg_temp.go('fo_bad', pg_temp.fan()); END $d$;
SELECT pg_temp.mark('fo_bad_state', pg_temp.state('fo_bad'));
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'complete', fan_out => pg_temp.jobs('fo_bad', 1)) ->> 'raised', '22023',
          'fan_out with complete raises invalid_parameter_value');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'rewait', fan_out => pg_temp.jobs('fo_bad', 1)) ->> 'raised', '22023',
          'fan_out with rewait raises');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'park', fan_out => '[{"job_class": "app:Notify", "arguments": {}}]') ->> 'raised', '22023',
          'a fan-out job without a queue raises');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'park', fan_out => '[{"queue": "q", "job_class": "app:Notify", "arguments": []}]') ->> 'raised', '22023',
          'a fan-out job whose arguments are not an object raises');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'park', fan_out => '{"queue": "q"}') ->> 'raised', '22023',
          'a fan_out that is not an array raises');
SELECT is(pg_temp.state('fo_bad'), pg_temp.marked('fo_bad_state'), '... nothing changed');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fo_bad')::text), 0::bigint, '... no batch left');

SELECT * FROM finish();
ROLLBACK;
