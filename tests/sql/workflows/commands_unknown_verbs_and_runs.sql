-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: Unknown verbs and runs.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- Unknown verbs and runs.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('verbs', '[{"name": "a"}]'); END $d$;
SELECT pg_temp.mark('verbs_state', pg_temp.state('verbs'));
SELECT is(pg_temp.cmd('verbs', 'explode'),
          '{"ok": false, "code": "invalid", "message": "''explode'' is not a workflow action"}'::jsonb,
          'workflow_command: an unknown verb is invalid');
SELECT is(pg_temp.cmd('verbs', NULL) ->> 'code', 'invalid', 'workflow_command: a NULL verb is invalid');
SELECT is(pg_temp.cmd('verbs', 'complete') ->> 'code', 'invalid', 'workflow_command: a runner verb is invalid from outside');
SELECT is(pg_temp.state('verbs'), pg_temp.marked('verbs_state'), 'workflow_command: an invalid verb changes nothing');
SELECT is(pgbus.workflow_command(gen_random_uuid(), 'pause'), '{"ok": false, "code": "not_found"}'::jsonb,
          'workflow_command: an unknown run is not_found');
SELECT is(pgbus.workflow_command(NULL, 'cancel'), '{"ok": false, "code": "not_found"}'::jsonb,
          'workflow_command: a NULL run is not_found');

SELECT * FROM finish();
ROLLBACK;
