-- pgTAP tests for sql/functions/075_workflow_waiting.sql: The schema: the new columns, the signals table and its CHECKs, the functions.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(43);

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

SELECT * FROM finish();
ROLLBACK;
