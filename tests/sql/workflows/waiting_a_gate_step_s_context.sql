-- pgTAP tests for sql/functions/075_workflow_waiting.sql: A gate step's context: the signal it claimed first, then the pending ones of its name, oldest first.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(15);

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

SELECT * FROM finish();
ROLLBACK;
