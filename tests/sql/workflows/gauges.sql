-- pgTAP tests for the gauges read without sweeping (sql/functions/132_workflow_gauges.sql).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(4);

SELECT pgbus.workflow_register('t_wg', '[{"name": "one"}]', 'd1', 't_wg');
DELETE FROM pgbus.workflows;  -- (a clean slate inside this test's transaction)
SELECT is(pgbus.workflow_gauges(), '{"runs": [], "stuck": []}'::jsonb, 'no runs: empty gauges');
CREATE TEMP TABLE t_run AS SELECT * FROM pgbus.workflow_start('t_wg');
SELECT * FROM pgbus.workflow_start('t_wg');
SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'pause', 'ops');
SELECT set_eq($$SELECT jsonb_array_elements(pgbus.workflow_gauges() -> 'runs')$$,
              $$VALUES ('{"count": 1, "status": "ready", "workflow_class": "t_wg"}'::jsonb),
                       ('{"count": 1, "status": "paused", "workflow_class": "t_wg"}')$$,
              'runs: ongoing runs by class and status');
SELECT is(pgbus.workflow_gauges() -> 'stuck', '[{"count": 1, "reason": "paused_manual", "workflow_class": "t_wg"}]'::jsonb,
          'stuck: by class and reason, as workflow_stuck tells it');
SELECT is((SELECT status FROM pgbus.workflows WHERE workflow_id = (SELECT workflow_id FROM t_run)), 'paused',
          'reading the gauges changes nothing');

SELECT * FROM finish();
ROLLBACK;
