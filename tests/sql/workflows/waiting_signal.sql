-- pgTAP tests for sql/functions/075_workflow_waiting.sql: signal (workflow_command 'signal').
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(44);

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
-- signal (workflow_command 'signal')
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('sig', pg_temp.gate(3600)); PERFORM pg_temp.park('sig'); END $d$;
SELECT pg_temp.mark('sig_a', to_jsonb(pg_temp.cur('sig')));
SELECT pg_temp.mark('sig_msg', to_jsonb((pg_temp.att(pg_temp.cur('sig'))).msg_id));
-- Another name: stored, nothing woken.
SELECT pg_temp.mark_ev('sig_ev0');
SELECT pg_temp.mark('sig_other', pg_temp.signal('sig', 'shipped', NULL, NULL, 'app'));
SELECT is(pg_temp.marked('sig_other') - 'signal_id', '{"ok": true, "status": "waiting", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal of another name: ok, the run still waiting, woke false');
SELECT results_eq($$SELECT w.status, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    WHERE w.workflow_id = pg_temp.run('sig')$$,
                  $$VALUES ('waiting'::text, 'waiting'::text)$$, 'signal of another name: the gate keeps waiting');
SELECT results_eq($$SELECT event, step_id, actor, details FROM pg_temp.evs('sig', 'sig_ev0')$$,
                  $$VALUES ('signal_received'::text, pg_temp.id('sig_a'), 'app'::text,
                            jsonb_build_object('signal_id', (pg_temp.marked('sig_other') ->> 'signal_id')::bigint, 'name', 'shipped'))$$,
                  'signal of another name: only signal_received');
-- The gate's name: stored pending with who and why, and the gate wakes.
SELECT pg_temp.mark_ev('sig_ev');
SELECT pg_temp.mark('sig_ans', pg_temp.cmd('sig', 'signal', 'billing', 'paid in full',
                                           '{"name": " paid ", "payload": {"amount": 12}, "idempotency_key": "pay-1"}'));
SELECT pg_temp.mark('sig_s', pg_temp.marked('sig_ans') -> 'signal_id');
SELECT is(pg_temp.marked('sig_ans'),
          jsonb_build_object('ok', true, 'status', 'ready', 'signal_id', pg_temp.id('sig_s'), 'duplicate_delivery', false, 'woke', true),
          'signal for the gate: ok, ready, woke true, with its signal_id');
SELECT results_eq(
    $$SELECT workflow_id, name, payload, idempotency_key, status, step_name, step_id, actor, reason, pg_temp.recent(created_at),
             claimed_at, consumed_at
      FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('sig_s')$$,
    $$VALUES (pg_temp.run('sig'), 'paid'::text, '{"amount": 12}'::jsonb, 'pay-1'::text, 'pending'::text, NULL::text, NULL::bigint,
              'billing'::text, 'paid in full'::text, true, NULL::timestamptz, NULL::timestamptz)$$,
    'signal: stored pending (the name trimmed) with payload, key, actor and reason; nobody took it yet');
SELECT results_eq(
    $$SELECT w.status, w.current_step_id, s.status, pg_temp.recent(s.scheduled_at), s.msg_id <> pg_temp.id('sig_msg'),
             (pg_temp.amsg(s.step_id)).vt <= clock_timestamp(), (pg_temp.amsg(s.step_id)).message -> 'kwargs'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('sig')$$,
    $$VALUES ('ready'::text, pg_temp.id('sig_a'), 'scheduled'::text, true, true, true,
              jsonb_build_object('workflow_id', pg_temp.run('sig'), 'step_id', pg_temp.id('sig_a')))$$,
    'signal wakes the gate: the run ready, the same attempt scheduled now with a new visible StepJob message');
SELECT is(pg_temp.has_msg('t_wfw_sig', pg_temp.id('sig_msg'), 'a'), true, 'signal wakes the gate: the parked message stays archived');
SELECT is(pg_temp.has_msg('t_wfw_sig', pg_temp.id('sig_msg')), false, '... and out of the queue');
SELECT results_eq($$SELECT event, step_id, actor, reason, details FROM pg_temp.evs('sig', 'sig_ev')$$,
                  $$VALUES ('signal_received'::text, pg_temp.id('sig_a'), 'billing'::text, 'paid in full'::text,
                            jsonb_build_object('signal_id', pg_temp.id('sig_s'), 'name', 'paid', 'idempotency_key', 'pay-1')),
                           ('step_woken', pg_temp.id('sig_a'), 'billing', NULL,
                            jsonb_build_object('step', 'capture', 'signal_id', pg_temp.id('sig_s')))$$,
                  'signal for the gate: events signal_received and step_woken, by the signal''s actor');
SELECT is(pg_temp.attempts('sig'), 'capture#1:scheduled', 'signal for the gate: no new attempt');
-- The same key again: nothing stored, no event, answered as a duplicate.
SELECT pg_temp.mark('sig_state', pg_temp.state('sig'));
SELECT is(pg_temp.cmd('sig', 'signal', 'billing', NULL, '{"name": "paid", "payload": {"amount": 99}, "idempotency_key": "pay-1"}'),
          jsonb_build_object('ok', true, 'status', 'ready', 'signal_id', pg_temp.id('sig_s'), 'duplicate_delivery', true, 'woke', false),
          'signal with a key seen before: duplicate_delivery, the first signal''s id');
SELECT is(pg_temp.signal('sig', 'paid', NULL, '  pay-1 ') ->> 'duplicate_delivery', 'true',
          'signal with the same key padded with spaces: a duplicate too');
SELECT is(pg_temp.state('sig'), pg_temp.marked('sig_state'), 'duplicate deliveries: nothing stored, no event, nothing changed');
SELECT is((pg_temp.sig(pg_temp.id('sig_s'))).payload, '{"amount": 12}'::jsonb, 'duplicate delivery: the first payload is kept');
-- A blank or whitespace key is no key (#550): stored with a NULL key, never deduplicated.
SELECT pg_temp.mark('sig_b1', pg_temp.signal('sig', 'note', NULL, '   '));
SELECT pg_temp.mark('sig_b2', pg_temp.signal('sig', 'note', NULL, '   '));
SELECT pg_temp.mark('sig_b3', pg_temp.signal('sig', 'note', NULL, ''));
SELECT is(ARRAY[pg_temp.marked('sig_b1') ->> 'duplicate_delivery', pg_temp.marked('sig_b2') ->> 'duplicate_delivery',
                pg_temp.marked('sig_b3') ->> 'duplicate_delivery'], ARRAY['false', 'false', 'false'],
          'signals with a blank key (#550): none is a duplicate');
SELECT results_eq($$SELECT count(*), count(DISTINCT signal_id), count(idempotency_key) FROM pgbus.workflow_signals
                    WHERE workflow_id = pg_temp.run('sig') AND name = 'note'$$,
                  $$VALUES (3::bigint, 3::bigint, 0::bigint)$$, 'signals with a blank key: all three stored, with a NULL key');
SELECT is((SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('sig') AND event = 'signal_received'
             AND details ->> 'name' = 'note' AND NOT details ? 'idempotency_key'), 3::bigint,
          'signals with a blank key: three signal_received events without a key');
-- A key is per run: the same key on another run is a new signal; a blank reason is no reason.
DO $d$ BEGIN PERFORM pg_temp.start('sig_other_run', pg_temp.gate()); END $d$;
SELECT is(pg_temp.signal('sig_other_run', 'paid', NULL, 'pay-1', 'app', '   ') ->> 'duplicate_delivery', 'false',
          'the same key on another run: not a duplicate');
SELECT results_eq($$SELECT idempotency_key, reason FROM pgbus.workflow_signals WHERE workflow_id = pg_temp.run('sig_other_run')$$,
                  $$VALUES ('pay-1'::text, NULL::text)$$, '... stored with its key, a blank reason stored as NULL');
-- Invalid signals: refused, nothing changes.
SELECT pg_temp.mark('sig_state2', pg_temp.state('sig'));
SELECT is(pg_temp.cmd('sig', 'signal', 'app', NULL, '{"payload": {}}'),
          '{"ok": false, "code": "invalid", "status": "ready", "message": "a signal is {\"name\": 1-255 characters, \"payload\": {...}, \"idempotency_key\": at most 255 characters}"}'::jsonb,
          'signal without a name: invalid, with the shape of a signal');
SELECT is(pg_temp.signal('sig', '   ') ->> 'code', 'invalid', 'signal with a whitespace name: invalid');
SELECT is(pg_temp.signal('sig', repeat('n', 256)) ->> 'code', 'invalid', 'signal with a 256-character name: invalid');
SELECT is(pg_temp.signal('sig', 'paid', NULL, repeat('k', 256)) ->> 'code', 'invalid', 'signal with a 256-character key: invalid');
SELECT is(pg_temp.signal('sig', 'paid', '[1, 2]') ->> 'code', 'invalid', 'signal with an array payload: invalid');
SELECT is(pg_temp.signal('sig', 'paid', '"text"') ->> 'code', 'invalid', 'signal with a string payload: invalid');
SELECT is(pg_temp.cmd('sig', 'signal', 'app', NULL, '{"name": "paid", "payload": null}') ->> 'code', 'invalid',
          'signal with a null payload: invalid');
SELECT is(pg_temp.state('sig'), pg_temp.marked('sig_state2'), 'invalid signals: nothing changed');
SELECT is(pg_temp.signal('sig', repeat('n', 255), NULL, repeat('k', 255)) ->> 'ok', 'true', 'signal with a 255-character name and key: taken');
-- The woken step begins with the signal in its context and completes with it: consumed.
SELECT is(pg_temp.read('sig_woken', 'sig'), 1, 'the woken gate step is read');
SELECT is(pg_temp.ctx('sig_woken') #> '{signals,0,signal_id}', to_jsonb(pg_temp.id('sig_s')), '... with the signal in its context');
SELECT is(pg_temp.end_step(pg_temp.id('sig_a'), 'complete', signal_id => pg_temp.id('sig_s')) ->> 'status', 'ready',
          'the woken step completes taking the signal');
SELECT results_eq($$SELECT status, step_name, step_id, claimed_at IS NOT NULL, pg_temp.recent(consumed_at)
                    FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('sig_s')$$,
                  $$VALUES ('consumed'::text, 'capture'::text, pg_temp.id('sig_a'), true, true)$$,
                  'the signal is consumed by the attempt that completed');

-- Ended runs refuse a signal.
DO $d$ BEGIN PERFORM pg_temp.start('sig_cancelled', pg_temp.gate()); PERFORM pg_temp.cmd('sig_cancelled', 'cancel'); END $d$;
SELECT is(pg_temp.signal('sig_cancelled', 'paid'), '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb,
          'signal to a cancelled run: not_allowed');
SELECT is(pg_temp.signals('sig_cancelled'), '', '... nothing stored');
DO $d$ BEGIN PERFORM pg_temp.go('sig_finished', '[{"name": "a"}]'); PERFORM pg_temp.end_step(pg_temp.cur('sig_finished'), 'finished'); END $d$;
SELECT is(pg_temp.signal('sig_finished', 'paid'), '{"ok": false, "code": "not_allowed", "status": "finished"}'::jsonb,
          'signal to a finished run: not_allowed');
SELECT is(pg_temp.signals('sig_finished'), '', '... nothing stored');
SELECT is(pgbus.workflow_command(gen_random_uuid(), 'signal', 'app', NULL, '{"name": "paid"}'), '{"ok": false, "code": "not_found"}'::jsonb,
          'signal to an unknown run: not_found');
-- A running run takes it (the step will see it when it parks).
DO $d$ BEGIN PERFORM pg_temp.go('sig_running', pg_temp.gate()); END $d$;
SELECT is(pg_temp.signal('sig_running', 'paid') - 'signal_id', '{"ok": true, "status": "running", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal to a running run: stored, the run still running');

-- A paused run takes the signal and stays paused until resume, which wakes the gate.
DO $d$ BEGIN PERFORM pg_temp.go('sig_paused', pg_temp.gate()); PERFORM pg_temp.park('sig_paused'); PERFORM pg_temp.cmd('sig_paused', 'pause'); END $d$;
SELECT pg_temp.mark('sig_paused_a', to_jsonb(pg_temp.cur('sig_paused')));
SELECT pg_temp.mark_ev('sig_paused_ev');
SELECT pg_temp.mark('sig_paused_ans', pg_temp.signal('sig_paused', 'paid', '{"ok": 1}', 'p1', 'billing'));
SELECT is(pg_temp.marked('sig_paused_ans') - 'signal_id', '{"ok": true, "status": "paused", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal to a run paused while waiting: taken, the run stays paused, nothing woken');
SELECT results_eq($$SELECT w.status, w.pause_cause, s.status, g.status FROM pgbus.workflows w
                    JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    JOIN pgbus.workflow_signals g ON g.workflow_id = w.workflow_id WHERE w.workflow_id = pg_temp.run('sig_paused')$$,
                  $$VALUES ('paused'::text, 'manual'::text, 'waiting'::text, 'pending'::text)$$,
                  'signal to a paused run: the run paused, the attempt waiting, the signal pending');
SELECT is(pg_temp.events('sig_paused', pg_temp.id('sig_paused_ev')), 'signal_received', 'signal to a paused run: only signal_received');
SELECT pg_temp.mark_ev('sig_paused_ev2');
SELECT is(pg_temp.cmd('sig_paused', 'resume', 'ops'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume of a paused run whose signal came meanwhile: ready (woken)');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.step_id, s.status, (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('sig_paused')$$,
    $$VALUES ('ready'::text, NULL::text, pg_temp.id('sig_paused_a'), 'scheduled'::text, true)$$,
    'resume wakes it: the same attempt scheduled with a visible message');
SELECT results_eq($$SELECT event, actor, details FROM pg_temp.evs('sig_paused', 'sig_paused_ev2')$$,
                  $$VALUES ('resumed'::text, 'ops'::text, '{"step": "capture"}'::jsonb),
                           ('step_woken', 'ops', jsonb_build_object('step', 'capture', 'signal_id', (pg_temp.marked('sig_paused_ans') ->> 'signal_id')::bigint))$$,
                  'resume wakes it: events resumed and step_woken by the operator');

SELECT * FROM finish();
ROLLBACK;
