-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: The functions exist.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(4);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'workflow_command', ARRAY['uuid', 'text', 'text', 'text', 'jsonb'],
                    'pgbus.workflow_command(uuid, text, text, text, jsonb) exists');
SELECT has_function('pgbus', 'workflow_available_actions', ARRAY['uuid'], 'pgbus.workflow_available_actions(uuid) exists');
SELECT has_function('pgbus', 'workflow_stuck', ARRAY['interval', 'interval', 'interval', 'text'], 'pgbus.workflow_stuck(interval, interval, interval, text) exists');
SELECT has_function('pgbus', 'workflow_sweep', ARRAY['interval', 'text', 'interval', 'interval', 'interval', 'interval', 'interval'],
                    'pgbus.workflow_sweep(interval, text, interval, interval, interval, interval, interval) exists');

SELECT * FROM finish();
ROLLBACK;
