-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Claiming a signal (workflow_end_step signal_id): pending -> claimed -> consumed.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(30);

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
-- Claiming a signal (workflow_end_step signal_id): pending -> claimed -> consumed
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('claim', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_s1', pg_temp.signal('claim', 'paid', '{"n": 1}') -> 'signal_id');
SELECT pg_temp.mark('claim_s2', pg_temp.signal('claim', 'paid', '{"n": 2}') -> 'signal_id');
SELECT is(pg_temp.read('claim', 'claim'), 1, 'setup: the gate step begins');
SELECT pg_temp.mark('claim_a1', to_jsonb(pg_temp.cur('claim')));
SELECT pg_temp.mark_ev('claim_ev');
-- The step takes s1 and fails, pausing the run: s1 stays claimed.
SELECT is(pg_temp.end_step(pg_temp.id('claim_a1'), 'pause', error => '{"class": "app.Boom", "message": "boom"}',
                           signal_id => pg_temp.id('claim_s1')) ->> 'status', 'paused',
          'a step that takes a signal and fails (pause): paused');
SELECT results_eq($$SELECT status, step_name, step_id, pg_temp.recent(claimed_at), consumed_at FROM pgbus.workflow_signals
                    WHERE signal_id = pg_temp.id('claim_s1')$$,
                  $$VALUES ('claimed'::text, 'capture'::text, pg_temp.id('claim_a1'), true, NULL::timestamptz)$$,
                  'the signal is claimed by the step and its attempt, not consumed');
SELECT results_eq($$SELECT status, outcome, signal_id, error_class FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('claim_a1')$$,
                  $$VALUES ('failed'::text, 'pause'::text, pg_temp.id('claim_s1'), 'app.Boom'::text)$$,
                  'the failed attempt records the signal it took');
SELECT results_eq($$SELECT event, step_id, actor, details FROM pg_temp.evs('claim', 'claim_ev')$$,
                  $$VALUES ('signal_claimed'::text, pg_temp.id('claim_a1'), NULL::text,
                            jsonb_build_object('signal_id', pg_temp.id('claim_s1'), 'name', 'paid', 'step', 'capture')),
                           ('step_failed', pg_temp.id('claim_a1'), NULL, '{"step": "capture", "attempt": 1, "verb": "pause", "error_class": "app.Boom"}'),
                           ('paused', pg_temp.id('claim_a1'), 'step', '{"error_class": "app.Boom"}')$$,
                  'events signal_claimed, step_failed, paused');
SELECT is(pg_temp.signals('claim'), 'paid:claimed,paid:pending', 'the other signal stays pending');
SELECT pg_temp.mark('claim_claimed_at', to_jsonb((pg_temp.sig(pg_temp.id('claim_s1'))).claimed_at));
-- The next attempt sees it as claimed and takes it again: no second signal_claimed; consumed on completion.
SELECT is(pg_temp.cmd('claim', 'resume') ->> 'status', 'ready', 'setup: resumed');
SELECT is(pg_temp.read('claim2', 'claim'), 1, 'setup: attempt 2 begins');
SELECT is((pg_temp.ctx('claim2') -> 'signals' -> 0) - 'created_at',
          jsonb_build_object('signal_id', pg_temp.id('claim_s1'), 'name', 'paid', 'payload', '{"n": 1}'::jsonb, 'idempotency_key', NULL,
                             'status', 'claimed'),
          'attempt 2''s context: the claimed signal first');
SELECT pg_temp.mark('claim_a2', to_jsonb(pg_temp.cur('claim')));
SELECT pg_temp.mark_ev('claim_ev2');
SELECT is(pg_temp.end_step(pg_temp.id('claim_a2'), 'complete', '{"captured": true}', signal_id => pg_temp.id('claim_s1')) ->> 'status', 'ready',
          'attempt 2 completes taking the claimed signal again');
SELECT results_eq($$SELECT status, step_id, claimed_at = (pg_temp.marked('claim_claimed_at') #>> '{}')::timestamptz, pg_temp.recent(consumed_at)
                    FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('claim_s1')$$,
                  $$VALUES ('consumed'::text, pg_temp.id('claim_a2'), true, true)$$,
                  'the signal is consumed, moved to attempt 2, its claimed_at kept');
SELECT is(pg_temp.events('claim', pg_temp.id('claim_ev2')), 'step_completed,step_scheduled', 'taking it again writes no signal_claimed');
SELECT results_eq($$SELECT status, signal_id, output FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('claim_a2')$$,
                  $$VALUES ('completed'::text, pg_temp.id('claim_s1'), '{"captured": true}'::jsonb)$$,
                  'attempt 2 completed with the signal recorded');
SELECT is(pg_temp.signals('claim'), 'paid:consumed,paid:pending', 'the untaken signal is still pending');

-- A claimed signal survives a reattempt too.
DO $d$ BEGIN PERFORM pg_temp.go('claim_re', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_re_s', pg_temp.signal('claim_re', 'paid') -> 'signal_id');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_re'), 'reattempt', signal_id => pg_temp.id('claim_re_s')) ->> 'status', 'ready',
          'a step that takes a signal and asks for a reattempt: ready');
SELECT results_eq($$SELECT g.status, s.status FROM pgbus.workflow_signals g JOIN pgbus.workflow_steps s ON s.step_id = g.step_id
                    WHERE g.signal_id = pg_temp.id('claim_re_s')$$,
                  $$VALUES ('claimed'::text, 'interrupted'::text)$$, '... the signal stays claimed by the interrupted attempt');
SELECT is(pg_temp.read('claim_re2', 'claim_re'), 1, 'setup: attempt 2 begins');
SELECT is(pg_temp.ctx('claim_re2') #>> '{signals,0,status}', 'claimed', '... its context has the claimed signal');

-- A signal that is not pending for this run cannot be taken: invalid_parameter_value, nothing changes.
DO $d$ BEGIN PERFORM pg_temp.go('claim_bad', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_bad_s', pg_temp.signal('claim_bad', 'paid') -> 'signal_id');
SELECT pg_temp.mark('claim_bad_state', pg_temp.state('claim_bad'));
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => pg_temp.id('claim_s1')) ->> 'raised', '22023',
          'taking a consumed signal of another run raises invalid_parameter_value');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => pg_temp.id('claim_s2')) ->> 'raised', '22023',
          'taking a pending signal of another run raises');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => -1) ->> 'raised', '22023',
          'taking an unknown signal raises');
SELECT is(pg_temp.state('claim_bad'), pg_temp.marked('claim_bad_state'), '... and nothing changed');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'skip', signal_id => pg_temp.id('claim_bad_s')) ->> 'status', 'ready',
          'a step that skips taking a signal');
SELECT is(pg_temp.signals('claim_bad'), 'paid:consumed', '... consumes it');
-- A consumed signal of its own run cannot be taken again.
SELECT is(pg_temp.read('claim_bad2', 'claim_bad'), 1, 'setup: the next step begins');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => pg_temp.id('claim_bad_s')) ->> 'raised', '22023',
          'taking a consumed signal of the run raises');

-- A refused end takes no signal: the run was cancelled while the step ran.
DO $d$ BEGIN PERFORM pg_temp.go('claim_refused', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_refused_s', pg_temp.signal('claim_refused', 'paid') -> 'signal_id');
SELECT is(pg_temp.cmd('claim_refused', 'cancel') ->> 'status', 'cancelled', 'setup: cancelled while the step ran');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_refused'), 'complete', signal_id => pg_temp.id('claim_refused_s')),
          '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb, 'a refused end with a signal: not_allowed');
SELECT results_eq($$SELECT status, step_id FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('claim_refused_s')$$,
                  $$VALUES ('pending'::text, NULL::bigint)$$, '... the signal stays pending, untaken');
SELECT is(pg_temp.events('claim_refused') LIKE '%signal_claimed%', false, '... no signal_claimed event');

SELECT * FROM finish();
ROLLBACK;
