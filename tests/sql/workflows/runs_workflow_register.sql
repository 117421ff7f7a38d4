-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_register.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(28);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_register
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.workflow_register('t_wfr_reg', '[{"name": "a", "wait": 0, "timeout": 60}, {"name": "b", "wait": 5}]',
                                  'd1', 't_wfr_reg'), 'd1', 'workflow_register: returns the digest');
SELECT results_eq(
    $$SELECT steps, removed_steps, digest, queue, registered_at BETWEEN now() AND clock_timestamp()
      FROM pgbus.workflow_definitions WHERE workflow_class = 't_wfr_reg'$$,
    $$VALUES ('[{"name": "a", "wait": 0, "timeout": 60}, {"name": "b", "wait": 5}]'::jsonb, '{}'::text[], 'd1'::text,
              't_wfr_reg'::text, true)$$,
    'workflow_register: stores steps, no removed steps, digest, queue, registered now (by the clock)');
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
