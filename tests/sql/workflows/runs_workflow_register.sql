-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_register.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(28);

-- Every scenario has its own class and queue ('t_wfr_<name>'), so that reading one scenario's
-- step begins no other.
CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfr_' || $1 $f$;
\ir ../include/workflow_helpers.psql
-- Registers t_wfr_<name> and starts a run of it, remembered as `name`.
CREATE FUNCTION pg_temp.start(name text, steps text, arguments jsonb DEFAULT '{}') RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name), arguments => start.arguments, actor => 'tester');
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;
-- Reads the queue t_wfr_<queue> the way a worker does; keeps the rows under `tag`; how many
-- (NULL, with a warning, when read_jobs raised).
CREATE FUNCTION pg_temp.read(tag text, queue text, stall_action text DEFAULT 'pause') RETURNS integer
LANGUAGE plpgsql AS $f$
DECLARE
    n integer;
BEGIN
    INSERT INTO t_reads
    -- (A redelivery, tagged '..._again', is read by another worker than the first read.)
    SELECT read.tag, r.* FROM pgbus.read_jobs(ARRAY[pg_temp.cls(queue)], 30, 10,
                                              CASE WHEN tag LIKE '%again%' THEN 'host:2' ELSE 'host:1' END,
                                              'rev', stall_action) r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
EXCEPTION WHEN OTHERS THEN
    -- Shown on stderr; the read is undone and the tests that follow go on (and fail).
    RAISE WARNING 'pg_temp.read(%, %): read_jobs raised %: %', tag, queue, SQLSTATE, SQLERRM;
    RETURN NULL;
END;
$f$;
CREATE FUNCTION pg_temp.ctx(tag text) RETURNS jsonb LANGUAGE sql AS $f$ SELECT context FROM t_reads WHERE t_reads.tag = $1 $f$;
-- workflow_end_step, with an error it raises answered as {"raised": SQLSTATE, "message": ...} so
-- that the tests after it still run (the failed call's changes are undone).
CREATE FUNCTION pg_temp.end_step(step_id bigint, verb text, output jsonb DEFAULT NULL, error jsonb DEFAULT NULL,
                                 wait interval DEFAULT NULL, reason text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $f$
BEGIN
    RETURN pgbus.workflow_end_step(step_id, verb, output, error, wait, reason);
EXCEPTION WHEN OTHERS THEN
    RETURN jsonb_build_object('raised', SQLSTATE, 'message', SQLERRM);
END;
$f$;
-- The run's row, attempts and event count, to show that something changed nothing.
CREATE FUNCTION pg_temp.state(name text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT jsonb_build_object(
        'run', (SELECT to_jsonb(w) FROM pgbus.workflows w WHERE w.workflow_id = pg_temp.run($1)),
        'steps', (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.step_id) FROM pgbus.workflow_steps s WHERE s.workflow_id = pg_temp.run($1)),
        'events', (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = pg_temp.run($1)))
$f$;

-------------------------------------------------------------------------------------------------
-- workflow_register
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.workflow_register('t_wfr_reg', '[{"name": "a", "wait": 0, "timeout": 60}, {"name": "b", "wait": 5}]',
                                  'd1', 't_wfr_reg'), 'd1', 'workflow_register: returns the digest');
SELECT results_eq(
    $$SELECT steps, removed_steps, digest, queue, registered_at FROM pgbus.workflow_definitions WHERE workflow_class = 't_wfr_reg'$$,
    $$VALUES ('[{"name": "a", "wait": 0, "timeout": 60}, {"name": "b", "wait": 5}]'::jsonb, '{}'::text[], 'd1'::text,
              't_wfr_reg'::text, now())$$,
    'workflow_register: stores steps, no removed steps, digest, queue, registered now');
SELECT is(pgbus.workflow_register('t_wfr_reg', '[{"name": "a"}, {"name": "c"}]', 'd2', 't_wfr_reg2', ARRAY['b']), 'd2',
          'workflow_register: a new digest returns it');
SELECT results_eq(
    $$SELECT steps, removed_steps, digest, queue FROM pgbus.workflow_definitions WHERE workflow_class = 't_wfr_reg'$$,
    $$VALUES ('[{"name": "a"}, {"name": "c"}]'::jsonb, '{b}'::text[], 'd2'::text, 't_wfr_reg2'::text)$$,
    'workflow_register: a new digest replaces steps, removed steps, digest and queue (one row per class)');
SELECT is(pgbus.workflow_register('t_wfr_reg', '[{"name": "a"}, {"name": "c"}]', 'd2', 't_wfr_reg3'), 'd2',
          'workflow_register: the same digest on another queue');
SELECT is((SELECT queue FROM pgbus.workflow_definitions WHERE workflow_class = 't_wfr_reg'), 't_wfr_reg3',
          'workflow_register: a new queue with the same digest moves the class to it');
SELECT lives_ok($$SELECT pgbus.workflow_register('t_wfr_reg_null', '[{"name": "a"}]', 'd1', 't_wfr_reg', NULL)$$,
                'workflow_register: NULL removed steps are accepted');
SELECT is((SELECT removed_steps FROM pgbus.workflow_definitions WHERE workflow_class = 't_wfr_reg_null'), '{}'::text[],
          'workflow_register: NULL removed steps are stored as {}');
SELECT throws_ok($$SELECT pgbus.workflow_register('', '[{"name": "a"}]', 'd1', 't_wfr_bad')$$, '22023',
                 'pgbus: a workflow definition needs a class name and a digest', 'workflow_register: refuses an empty class');
SELECT throws_ok($$SELECT pgbus.workflow_register(NULL, '[{"name": "a"}]', 'd1', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses a NULL class');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a"}]', '  ', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses a blank digest');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a"}]', NULL, 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses a NULL digest');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '{"name": "a"}', 'd1', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses steps that are not an array');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', NULL, 'd1', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses NULL steps');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"wait": 0}]', 'd1', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses a step without a name');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": ""}]', 'd1', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses a step with an empty name');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '["a"]', 'd1', 't_wfr_bad')$$, '22023', NULL,
                 'workflow_register: refuses a step that is not an object');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a"}]', 'd1', 'Bad-Queue')$$, '22023', NULL,
                 'workflow_register: refuses an invalid queue name');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a"}]', 'd1', NULL)$$, '22023', NULL,
                 'workflow_register: refuses a NULL queue');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "wait_for": " "}]', 'd1', 't_wfr_bad')$$,
                 '22023', NULL, 'workflow_register: refuses a blank wait_for');
SELECT throws_ok(format($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "wait_for": "%s"}]', 'd1', 't_wfr_bad')$$,
                        repeat('s', 256)),
                 '22023', NULL, 'workflow_register: refuses a wait_for longer than 255 characters');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "wait_for": "go", "wait_timeout": 5, "on_timeout": "explode"}]', 'd1', 't_wfr_bad')$$,
                 '22023', NULL, 'workflow_register: refuses an unknown on_timeout');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "fan_out": true, "on_batch_failure": "reattempt"}]', 'd1', 't_wfr_bad')$$,
                 '22023', NULL, 'workflow_register: refuses an unknown on_batch_failure');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "wait_timeout": 5}]', 'd1', 't_wfr_bad')$$,
                 '22023', NULL, 'workflow_register: refuses a wait_timeout on a step that never waits');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "fan_out": true, "wait_timeout": 5, "on_timeout": "run"}]', 'd1', 't_wfr_bad')$$,
                 '22023', NULL, 'workflow_register: refuses on_timeout run for a fan_out');
SELECT throws_ok($$SELECT pgbus.workflow_register('t_wfr_bad', '[{"name": "a", "fan_out": true, "wait_for": "go"}]', 'd1', 't_wfr_bad')$$,
                 '22023', NULL, 'workflow_register: refuses a fan_out that is also a signal gate');
SELECT lives_ok($$SELECT pgbus.workflow_register('t_wfr_gate_opts', '[{"name": "a", "wait_for": "go", "wait_timeout": 5, "on_timeout": "run"},
                                                                  {"name": "b", "fan_out": true, "on_batch_failure": "skip", "wait_timeout": 9, "on_timeout": "cancel"}]',
                                                 'd1', 't_wfr_gate_opts')$$,
                'workflow_register: accepts a signal gate and a fan_out with their options');
SELECT is((SELECT count(*) FROM pgbus.workflow_definitions WHERE workflow_class = 't_wfr_bad'), 0::bigint,
          'workflow_register: refused definitions are not stored');

SELECT * FROM finish();
ROLLBACK;
