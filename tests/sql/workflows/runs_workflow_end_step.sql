-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_end_step: bad verbs and unknown attempts.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(5);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_end_step: bad verbs and unknown attempts.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('badverb', '[{"name": "a"}]'); END $d$;
SELECT throws_ok(format('SELECT pgbus.workflow_end_step(%s, %L)', pg_temp.cur('badverb'), 'explode'), '22023',
                 'pgbus: ''explode'' is not a step verb', 'workflow_end_step: an unknown verb raises 22023');
SELECT throws_ok(format('SELECT pgbus.workflow_end_step(%s, NULL)', pg_temp.cur('badverb')), '22023', NULL,
                 'workflow_end_step: a NULL verb raises 22023');
SELECT throws_ok(format('SELECT pgbus.workflow_end_step(%s, %L)', pg_temp.cur('badverb'), 'resume'), '22023', NULL,
                 'workflow_end_step: an outside verb raises 22023');
SELECT is((pg_temp.att(pg_temp.cur('badverb'))).status, 'running', 'workflow_end_step: a bad verb leaves the attempt running');
SELECT is(pgbus.workflow_end_step(987654321, 'complete'), '{"ok": false, "code": "not_found"}'::jsonb,
          'workflow_end_step: an unknown attempt is not_found');

SELECT * FROM finish();
ROLLBACK;
