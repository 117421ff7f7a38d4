-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_next_step.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_next_step
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('next', '[{"name": "a", "wait": 1}, {"name": "b", "removed": true}, {"name": "c"},
                             {"name": "d", "removed": false}, {"name": "e", "removed": true}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.reg('next2', '[{"name": "x", "removed": true}, {"name": "y"}]'); END $d$;
SELECT is(pgbus.workflow_next_step('t_wfr_next', NULL), '{"name": "a", "wait": 1}'::jsonb,
          'workflow_next_step: NULL gives the first step, with its options');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'a') ->> 'name', 'c', 'workflow_next_step: passes over a gravestone');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'b') ->> 'name', 'c', 'workflow_next_step: after a gravestone comes the next step');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'c') ->> 'name', 'd', 'workflow_next_step: "removed": false is a step');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'd'), NULL, 'workflow_next_step: NULL when only gravestones follow');
SELECT is(pgbus.workflow_next_step('t_wfr_next2', NULL) ->> 'name', 'y', 'workflow_next_step: a gravestone first step is passed over');
SELECT is(pgbus.workflow_next_step('t_wfr_unknown', NULL), NULL, 'workflow_next_step: NULL for an unregistered class');

SELECT * FROM finish();
ROLLBACK;
