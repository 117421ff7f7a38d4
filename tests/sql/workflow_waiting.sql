-- pgTAP tests for waiting steps (sql/schema/0005_waiting_steps.sql, sql/functions/075_workflow_waiting.sql
-- and the waiting parts of 070_workflow_steps.sql and 080_workflow_commands.sql): parking at a signal
-- gate or on a fan-out batch (workflow_end_step 'park' / 'rewait'), a gate step's context
-- (workflow_begin_step through pgbus.read_jobs), signals (workflow_command 'signal'), claiming and
-- consuming them (workflow_end_step signal_id), the no-lost-wake-up check (seen_signal_id), fan-out
-- batches and their end (workflow_fan_out_finished), pause / resume / resume_at / skip / cancel of a
-- waiting run, wait timeouts (workflow_expire_wait, workflow_sweep), the sweep's lost-callback repair,
-- workflow_stuck 'waiting_overdue' and workflow_available_actions.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(362);

-- Every scenario has its own class and queue ('t_wfw_<name>'), so that reading one scenario's
-- step begins no other.
CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfw_' || $1 $f$;
\ir include/workflow_helpers.psql
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
-- The schema: the new columns, the signals table and its CHECKs, the functions.
-------------------------------------------------------------------------------------------------
SELECT col_type_is('pgbus', 'workflow_steps', 'wait_for', 'text', 'workflow_steps.wait_for is text');
SELECT col_type_is('pgbus', 'workflow_steps', 'batch_id', 'uuid', 'workflow_steps.batch_id is uuid');
SELECT col_type_is('pgbus', 'workflow_steps', 'waiting_since', 'timestamp with time zone', 'workflow_steps.waiting_since is timestamptz');
SELECT col_type_is('pgbus', 'workflow_steps', 'wait_deadline', 'timestamp with time zone', 'workflow_steps.wait_deadline is timestamptz');
SELECT col_type_is('pgbus', 'workflow_steps', 'wait_remaining', 'interval', 'workflow_steps.wait_remaining is interval');
SELECT col_type_is('pgbus', 'workflow_steps', 'timed_out', 'boolean', 'workflow_steps.timed_out is boolean');
SELECT col_not_null('pgbus', 'workflow_steps', 'timed_out', 'workflow_steps.timed_out is NOT NULL');
SELECT col_default_is('pgbus', 'workflow_steps', 'timed_out', 'false', 'workflow_steps.timed_out defaults to false');
SELECT col_type_is('pgbus', 'workflow_steps', 'signal_id', 'bigint', 'workflow_steps.signal_id is bigint');
SELECT has_table('pgbus', 'workflow_signals', 'pgbus.workflow_signals exists');
SELECT columns_are('pgbus', 'workflow_signals',
                   ARRAY['signal_id', 'workflow_id', 'name', 'payload', 'idempotency_key', 'status', 'step_name',
                         'step_id', 'actor', 'reason', 'created_at', 'claimed_at', 'consumed_at'],
                   'pgbus.workflow_signals has exactly its columns');
SELECT has_column('pgbus', 'workflow_signals', 'idempotency_key', 'workflow_signals.idempotency_key exists');
SELECT col_default_is('pgbus', 'workflow_signals', 'status', 'pending'::text, 'workflow_signals.status defaults to pending');
SELECT has_index('pgbus', 'workflow_signals', 'workflow_signals_idempotency_key', 'the signals'' idempotency key index exists');
SELECT index_is_unique('pgbus', 'workflow_signals', 'workflow_signals_idempotency_key', '... and is unique');

SELECT has_function('pgbus', 'workflow_batch_job_class', ARRAY[]::text[], 'pgbus.workflow_batch_job_class() exists');
SELECT has_function('pgbus', 'workflow_gate_context', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text'],
                    'pgbus.workflow_gate_context(workflows, workflow_steps, text) exists');
SELECT has_function('pgbus', 'workflow_take_signal', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'bigint'],
                    'pgbus.workflow_take_signal(workflows, workflow_steps, bigint) exists');
SELECT has_function('pgbus', 'workflow_open_fan_out', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'jsonb'],
                    'pgbus.workflow_open_fan_out(workflows, workflow_steps, jsonb) exists');
SELECT has_function('pgbus', 'workflow_wake', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text', 'jsonb'],
                    'pgbus.workflow_wake(workflows, workflow_steps, text, jsonb) exists');
SELECT has_function('pgbus', 'workflow_resolve', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text'],
                    'pgbus.workflow_resolve(workflows, workflow_steps, text) exists');
SELECT has_function('pgbus', 'workflow_settle_wait', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'bigint', 'text'],
                    'pgbus.workflow_settle_wait(workflows, workflow_steps, bigint, text) exists');
SELECT has_function('pgbus', 'workflow_park', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text', 'jsonb', 'bigint', 'text'],
                    'pgbus.workflow_park(workflows, workflow_steps, text, jsonb, bigint, text) exists');
SELECT has_function('pgbus', 'workflow_time_out', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text'],
                    'pgbus.workflow_time_out(workflows, workflow_steps, text) exists');
SELECT has_function('pgbus', 'workflow_fan_out_finished', ARRAY['bigint', 'text'], 'pgbus.workflow_fan_out_finished(bigint, text) exists');
SELECT has_function('pgbus', 'workflow_expire_wait', ARRAY['uuid', 'text'], 'pgbus.workflow_expire_wait(uuid, text) exists');
SELECT has_function('pgbus', 'workflow_end_step',
                    ARRAY['bigint', 'text', 'jsonb', 'jsonb', 'interval', 'text', 'bigint', 'jsonb', 'bigint', 'timestamptz'],
                    'pgbus.workflow_end_step(bigint, text, jsonb, jsonb, interval, text, bigint, jsonb, bigint, timestamptz) exists');
SELECT hasnt_function('pgbus', 'workflow_end_step', ARRAY['bigint', 'text', 'jsonb', 'jsonb', 'interval', 'text'],
                      'the earlier workflow_end_step(bigint, text, jsonb, jsonb, interval, text) is gone');
SELECT is(pgbus.workflow_batch_job_class(), 'pgbus.workflow:BatchFinishedJob', 'the fan-out callback class is pgbus.workflow:BatchFinishedJob');

-- The signals table's CHECKs, on a run of its own.
DO $d$ BEGIN PERFORM pg_temp.start('checks', '[{"name": "a"}]'); END $d$;
SELECT lives_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name) VALUES (pg_temp.run('checks'), 'ok')$$,
                'workflow_signals: a name alone is a signal');
SELECT results_eq($$SELECT status, payload, idempotency_key, claimed_at, consumed_at FROM pgbus.workflow_signals
                    WHERE workflow_id = pg_temp.run('checks')$$,
                  $$VALUES ('pending'::text, '{}'::jsonb, NULL::text, NULL::timestamptz, NULL::timestamptz)$$,
                  'workflow_signals: pending, empty payload, no key by default');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name) VALUES (pg_temp.run('checks'), '   ')$$,
                 '23514', NULL, 'workflow_signals: a blank name is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name) VALUES (pg_temp.run('checks'), repeat('n', 256))$$,
                 '23514', NULL, 'workflow_signals: a name longer than 255 is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'x', ' ')$$,
                 '23514', NULL, 'workflow_signals: a blank idempotency key is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'x', '')$$,
                 '23514', NULL, 'workflow_signals: an empty idempotency key is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, payload) VALUES (pg_temp.run('checks'), 'x', '[1]')$$,
                 '23514', NULL, 'workflow_signals: an array payload is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, payload) VALUES (pg_temp.run('checks'), 'x', '"text"')$$,
                 '23514', NULL, 'workflow_signals: a string payload is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, status) VALUES (pg_temp.run('checks'), 'x', 'taken')$$,
                 '23514', NULL, 'workflow_signals: an unknown status is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, status) VALUES (pg_temp.run('checks'), 'x', 'claimed')$$,
                 '23514', NULL, 'workflow_signals: claimed without claimed_at is refused');
SELECT lives_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'x', 'k')$$,
                'workflow_signals: a real key is taken');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'y', 'k')$$,
                 '23505', NULL, 'workflow_signals: the same key twice for one run is refused');
SELECT throws_ok($$UPDATE pgbus.workflow_steps SET status = 'parked' WHERE workflow_id = pg_temp.run('checks')$$,
                 '23514', NULL, 'workflow_steps: the status check still refuses an unknown status');
SELECT lives_ok($$UPDATE pgbus.workflow_steps SET status = 'waiting' WHERE workflow_id = pg_temp.run('checks')$$,
                'workflow_steps: the status check takes waiting');

-------------------------------------------------------------------------------------------------
-- Parking at a signal gate (workflow_end_step 'park')
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('gate', pg_temp.gate(3600)); END $d$;
SELECT is(pg_temp.ctx('gate') - 'step_id' - 'workflow_id' - 'scheduled_at' - 'begun_at' - 'body_started' - 'timeout',
          '{"workflow_class": "t_wfw_gate", "step_name": "capture", "attempt": 1, "arguments": {}, "subject_type": null,
            "subject_id": null, "definition_outdated": false,
            "wait_for": "paid", "signals": [], "timed_out": false, "waited": false}'::jsonb,
          'begin_step of a gate step: the context adds wait_for, signals (none), timed_out and waited');
SELECT pg_temp.mark('gate_a', to_jsonb(pg_temp.cur('gate')));
SELECT pg_temp.mark('gate_msg', to_jsonb((pg_temp.att(pg_temp.cur('gate'))).msg_id));
SELECT pg_temp.mark_ev('gate_ev');
SELECT is(pg_temp.park('gate', reason => 'waiting for the payment'),
          '{"ok": true, "status": "waiting", "workflow_class": "t_wfw_gate", "step": "capture"}'::jsonb,
          'park at a gate: answers ok, waiting');
SELECT results_eq($$SELECT status, pause_cause, current_step_id FROM pgbus.workflows WHERE workflow_id = pg_temp.run('gate')$$,
                  $$VALUES ('waiting'::text, NULL::text, pg_temp.id('gate_a'))$$,
                  'park at a gate: the run is waiting on the same attempt');
SELECT results_eq(
    $$SELECT status, outcome, wait_for, batch_id, pg_temp.recent(waiting_since), pg_temp.recent(wait_deadline, interval '1 hour'),
             wait_remaining, timed_out, signal_id, ended_at, error_class
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('gate_a')$$,
    $$VALUES ('waiting'::text, 'park'::text, 'paid'::text, NULL::uuid, true, true, NULL::interval, false, NULL::bigint,
              NULL::timestamptz, NULL::text)$$,
    'park at a gate: the attempt waits for its signal, since now, until now + wait_timeout; not ended');
SELECT cmp_ok((pg_temp.att(pg_temp.id('gate_a'))).wait_deadline - (pg_temp.att(pg_temp.id('gate_a'))).waiting_since,
              '<=', interval '1 hour', 'park at a gate: the deadline is at most wait_timeout after waiting_since');
SELECT is(pg_temp.has_msg('t_wfw_gate', pg_temp.id('gate_msg')), false, 'park at a gate: the step''s message leaves the queue');
SELECT is(pg_temp.has_msg('t_wfw_gate', pg_temp.id('gate_msg'), 'a'), true, '... into the archive');
SELECT results_eq($$SELECT event, step_id, actor, reason, details - 'deadline' FROM pg_temp.evs('gate', 'gate_ev')$$,
                  $$VALUES ('step_waiting'::text, pg_temp.id('gate_a'), NULL::text, 'waiting for the payment'::text,
                            '{"step": "capture", "verb": "park", "wait_for": "paid"}'::jsonb)$$,
                  'park at a gate: one step_waiting event with the step, verb, gate and reason');
SELECT is((pg_temp.ev('gate', 'step_waiting')).details ->> 'deadline', to_jsonb((pg_temp.att(pg_temp.id('gate_a'))).wait_deadline) #>> '{}',
          'park at a gate: ... and the deadline');
SELECT is(pg_temp.read('gate_again', 'gate'), 0, 'park at a gate: nothing is left to read');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('gate')), '{skip,signal,pause,cancel}'::text[],
          'workflow_available_actions of a waiting run: skip, signal, pause, cancel');
SELECT is(pg_temp.park('gate') ->> 'code', 'stale', 'park of an attempt already waiting: stale');

-- The same delivery's end said again after its gate was woken (a retried statement) is stale
-- and leaves the woken attempt's new message alone.
DO $d$ BEGIN PERFORM pg_temp.go('again', '[{"name": "capture", "wait_for": "paid"}]'); END $d$;
SELECT is(pg_temp.park('again') ->> 'status', 'waiting', 'setup: parked');
SELECT is(pg_temp.signal('again', 'paid') ->> 'woke', 'true', 'setup: woken, its attempt sent again');
SELECT is(pg_temp.park('again'), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'a second end of the delivery that parked: stale');
SELECT is((SELECT count(*) FROM pgmq.q_t_wfw_again WHERE msg_id = (pg_temp.att(pg_temp.cur('again'))).msg_id), 1::bigint,
          '... and the woken attempt''s message is still in its queue');

-- A gate without a wait_timeout waits without a deadline.
DO $d$ BEGIN PERFORM pg_temp.go('gate_forever', '[{"name": "capture", "wait_for": "paid"}]'); END $d$;
SELECT is(pg_temp.park('gate_forever') ->> 'status', 'waiting', 'park without wait_timeout: waiting');
SELECT results_eq($$SELECT status, wait_deadline, wait_remaining FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('gate_forever')$$,
                  $$VALUES ('waiting'::text, NULL::timestamptz, NULL::interval)$$, 'park without wait_timeout: no deadline');
SELECT is((pg_temp.ev('gate_forever', 'step_waiting')).details, '{"step": "capture", "verb": "park", "wait_for": "paid"}'::jsonb,
          'park without wait_timeout: step_waiting has no deadline');
-- ... and parked while its run was paused, it still has none after resume.
DO $d$ BEGIN PERFORM pg_temp.go('forever_paused', '[{"name": "capture", "wait_for": "paid"}]');
             PERFORM pg_temp.cmd('forever_paused', 'pause'); END $d$;
SELECT is(pg_temp.park('forever_paused') ->> 'status', 'paused', 'park without wait_timeout on a paused run: paused');
SELECT results_eq($$SELECT wait_deadline, wait_remaining FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('forever_paused')$$,
                  $$VALUES (NULL::timestamptz, NULL::interval)$$, 'park without wait_timeout on a paused run: nothing remaining');
SELECT is(pg_temp.cmd('forever_paused', 'resume') ->> 'status', 'waiting', 'park without wait_timeout, resumed: waiting');
SELECT is((SELECT wait_deadline FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('forever_paused')), NULL,
          'park without wait_timeout, resumed: still no deadline');

-- A step with neither a gate nor a fan-out cannot park.
DO $d$ BEGIN PERFORM pg_temp.go('no_gate', '[{"name": "a"}]'); END $d$;
SELECT pg_temp.mark('no_gate_state', pg_temp.state('no_gate'));
SELECT is(pg_temp.park('no_gate') ->> 'raised', '22023', 'park of a step without a gate or a fan-out raises invalid_parameter_value');
SELECT is(pg_temp.state('no_gate'), pg_temp.marked('no_gate_state'), '... and changes nothing');
SELECT is(pg_temp.end_step(pg_temp.cur('no_gate'), 'wake') ->> 'raised', '22023', 'wake is not a step verb');
SELECT is(pg_temp.end_step(pg_temp.cur('no_gate'), 'resolve') ->> 'raised', '22023', 'resolve is not a step verb');

-- Paused while the step ran: the step parks, the run stays paused, the wait's clock stopped.
DO $d$ BEGIN PERFORM pg_temp.go('park_paused', pg_temp.gate(600)); END $d$;
SELECT is(pg_temp.cmd('park_paused', 'pause', 'ops') ->> 'status', 'paused', 'setup: paused while the gate step ran');
SELECT pg_temp.mark_ev('park_paused_ev');
SELECT is(pg_temp.park('park_paused'), '{"ok": true, "status": "paused", "was": "paused", "workflow_class": "t_wfw_park_paused", "step": "capture"}'::jsonb,
          'park on a paused run: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('park_paused')$$,
                  $$VALUES ('paused'::text, 'manual'::text)$$, 'park on a paused run: the run stays paused (manual)');
SELECT results_eq(
    $$SELECT status, outcome, wait_for, pg_temp.recent(waiting_since), wait_deadline,
             wait_remaining BETWEEN interval '600 seconds' - (clock_timestamp() - now()) AND interval '600 seconds'
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('park_paused')$$,
    $$VALUES ('waiting'::text, 'park'::text, 'paid'::text, true, NULL::timestamptz, true)$$,
    'park on a paused run: the attempt waits with no deadline and the whole wait_timeout remaining');
SELECT is(pg_temp.events('park_paused', pg_temp.id('park_paused_ev')), 'step_waiting', 'park on a paused run: only step_waiting');
-- Resumed: the deadline is the resume time + what remained.
UPDATE pgbus.workflow_steps SET wait_remaining = interval '7 minutes' WHERE step_id = pg_temp.cur('park_paused');
SELECT pg_temp.mark_ev('park_paused_ev2');
SELECT is(pg_temp.cmd('park_paused', 'resume', 'ops', 'go on'), '{"ok": true, "status": "waiting"}'::jsonb,
          'resume of a run paused while its step waited: answers ok, waiting');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, pg_temp.recent(s.wait_deadline, interval '7 minutes'), s.wait_remaining
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('park_paused')$$,
    $$VALUES ('waiting'::text, NULL::text, 'waiting'::text, true, NULL::interval)$$,
    'resume of a run paused while waiting: waiting again, deadline = resume time + wait_remaining, nothing remaining kept');
SELECT results_eq($$SELECT event, actor, reason, details FROM pg_temp.evs('park_paused', 'park_paused_ev2')$$,
                  $$VALUES ('resumed'::text, 'ops'::text, 'go on'::text, '{"step": "capture"}'::jsonb)$$,
                  'resume of a run paused while waiting: only a resumed event');
SELECT is(pg_temp.attempts('park_paused'), 'capture#1:waiting', 'resume of a run paused while waiting: no new attempt');

-- Pause of a waiting run: the clock stops with what is left; the paused time does not count.
DO $d$ BEGIN PERFORM pg_temp.go('pw', pg_temp.gate(3600)); PERFORM pg_temp.park('pw'); END $d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '25 minutes' WHERE step_id = pg_temp.cur('pw');
SELECT pg_temp.mark_ev('pw_ev');
SELECT is(pg_temp.cmd('pw', 'pause', 'ops', 'hold on'), '{"ok": true, "status": "paused"}'::jsonb, 'pause of a waiting run: answers ok, paused');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, s.wait_deadline,
             s.wait_remaining BETWEEN interval '25 minutes' - (clock_timestamp() - now()) AND interval '25 minutes'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('pw')$$,
    $$VALUES ('paused'::text, 'manual'::text, 'waiting'::text, NULL::timestamptz, true)$$,
    'pause of a waiting run: the attempt still waits, its deadline cleared, what was left kept in wait_remaining');
SELECT results_eq($$SELECT event, step_id, actor, reason FROM pg_temp.evs('pw', 'pw_ev')$$,
                  $$VALUES ('paused'::text, pg_temp.cur('pw'), 'ops'::text, 'hold on'::text)$$, 'pause of a waiting run: a paused event');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('pw')), '{resume,resume_at,signal,cancel}'::text[],
          'workflow_available_actions of a run paused while waiting: resume, resume_at, signal, cancel');
-- As if the pause had lasted while 40 minutes were left: the resume counts from then.
UPDATE pgbus.workflow_steps SET wait_remaining = interval '40 minutes' WHERE step_id = pg_temp.cur('pw');
SELECT is(pg_temp.cmd('pw', 'resume') ->> 'status', 'waiting', 'resume: waiting');
SELECT is(pg_temp.recent((pg_temp.att(pg_temp.cur('pw'))).wait_deadline, interval '40 minutes'), true,
          'resume: the deadline is the resume time + the 40 minutes that remained (not the old deadline)');

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

-------------------------------------------------------------------------------------------------
-- A gate step's context: the signal it claimed first, then the pending ones of its name, oldest first
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('ctx', pg_temp.gate(3600)); END $d$;
SELECT is(pg_temp.signal('ctx', 'paid', '{"n": 1}') - 'signal_id', '{"ok": true, "status": "ready", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal before the gate step began: stored, the ready run stays ready, nothing woken');
SELECT pg_temp.mark('ctx_s1', to_jsonb((SELECT max(signal_id) FROM pgbus.workflow_signals WHERE workflow_id = pg_temp.run('ctx'))));
SELECT pg_temp.mark('ctx_s2', pg_temp.signal('ctx', 'other', '{"n": 2}') -> 'signal_id');
SELECT pg_temp.mark('ctx_s3', pg_temp.signal('ctx', 'paid', '{"n": 3}', 'k3') -> 'signal_id');
SELECT is(pg_temp.read('ctx', 'ctx'), 1, 'setup: the gate step begins');
SELECT is(ARRAY(SELECT (e ->> 'signal_id')::bigint FROM jsonb_array_elements(pg_temp.ctx('ctx') -> 'signals') WITH ORDINALITY t(e, i) ORDER BY i),
          ARRAY[pg_temp.id('ctx_s1'), pg_temp.id('ctx_s3')],
          'context: the pending signals named like the gate, oldest first (not the other name)');
SELECT is(pg_temp.ctx('ctx') -> 'signals' -> 1,
          jsonb_build_object('signal_id', pg_temp.id('ctx_s3'), 'name', 'paid', 'payload', '{"n": 3}'::jsonb, 'idempotency_key', 'k3',
                             'status', 'pending', 'created_at', (pg_temp.sig(pg_temp.id('ctx_s3'))).created_at),
          'context: a signal is its id, name, payload, key, status and created_at');
SELECT is(pg_temp.ctx('ctx') #> '{signals,0,idempotency_key}', 'null'::jsonb, 'context: a signal without a key has a null key');
-- The step takes the newer one and fails: the signal stays claimed; the next attempt sees it first.
SELECT is(pg_temp.end_step(pg_temp.cur('ctx'), 'pause', error => '{"class": "app.Boom", "message": "boom"}',
                           signal_id => pg_temp.id('ctx_s3')) ->> 'status', 'paused', 'setup: the step took s3 and failed');
SELECT is(pg_temp.cmd('ctx', 'resume') ->> 'status', 'ready', 'setup: resumed');
SELECT pg_temp.mark('ctx_s4', pg_temp.signal('ctx', 'paid', '{"n": 4}') -> 'signal_id');
SELECT is(pg_temp.read('ctx2', 'ctx'), 1, 'setup: attempt 2 begins');
SELECT is(ARRAY(SELECT format('%s:%s', e ->> 'signal_id', e ->> 'status')
                FROM jsonb_array_elements(pg_temp.ctx('ctx2') -> 'signals') WITH ORDINALITY t(e, i) ORDER BY i),
          ARRAY[pg_temp.id('ctx_s3') || ':claimed', pg_temp.id('ctx_s1') || ':pending', pg_temp.id('ctx_s4') || ':pending'],
          'context of the next attempt: the signal the step claimed first, then the pending ones oldest first');
SELECT results_eq($$SELECT (pg_temp.ctx('ctx2') ->> 'attempt')::int, (pg_temp.ctx('ctx2') ->> 'waited')::boolean$$,
                  $$VALUES (2, false)$$, 'context of the next attempt: attempt 2, it never waited');

-- A gate for any name ('*').
DO $d$ BEGIN PERFORM pg_temp.start('any', pg_temp.gate(3600, NULL, '*')); END $d$;
SELECT pg_temp.mark('any_s1', pg_temp.signal('any', 'a') -> 'signal_id');
SELECT pg_temp.mark('any_s2', pg_temp.signal('any', 'b') -> 'signal_id');
SELECT is(pg_temp.read('any', 'any'), 1, 'setup: the any-name gate step begins');
SELECT is(ARRAY(SELECT (e ->> 'signal_id')::bigint FROM jsonb_array_elements(pg_temp.ctx('any') -> 'signals') WITH ORDINALITY t(e, i) ORDER BY i),
          ARRAY[pg_temp.id('any_s1'), pg_temp.id('any_s2')], 'context of a ''*'' gate: pending signals of every name');
SELECT is(pg_temp.park('any', pg_temp.id('any_s2')) ->> 'status', 'waiting', 'a ''*'' gate having seen both: waiting');
SELECT is(pg_temp.signal('any', 'whatever') ->> 'woke', 'true', 'a ''*'' gate: a signal of any name wakes it');

-- A step without a gate has no gate context.
DO $d$ BEGIN PERFORM pg_temp.go('plain', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.ctx('plain') ?| ARRAY['wait_for', 'signals', 'timed_out', 'waited'], false,
          'begin_step of a step without a gate: no gate context');

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
