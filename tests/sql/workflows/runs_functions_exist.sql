-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: The functions exist.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'workflow_register', ARRAY['text', 'jsonb', 'text', 'text', 'text[]'],
                    'pgbus.workflow_register(text, jsonb, text, text, text[]) exists');
SELECT has_function('pgbus', 'workflow_next_step', ARRAY['text', 'text'], 'pgbus.workflow_next_step(text, text) exists');
SELECT has_function('pgbus', 'workflow_start', ARRAY['text', 'text', 'text', 'jsonb', 'text', 'text', 'uuid'],
                    'pgbus.workflow_start(text, text, text, jsonb, text, text, uuid) exists');
SELECT has_function('pgbus', 'workflow_begin_step', ARRAY['text', 'bigint', 'jsonb', 'text', 'text', 'text', 'boolean'],
                    'pgbus.workflow_begin_step(text, bigint, jsonb, text, text, text, boolean) exists');
SELECT has_function('pgbus', 'workflow_end_step', ARRAY['bigint', 'text', 'jsonb', 'jsonb', 'interval', 'text', 'bigint', 'jsonb', 'bigint', 'timestamptz'],
                    'pgbus.workflow_end_step(bigint, text, jsonb, jsonb, interval, text, bigint, jsonb, bigint, timestamptz) exists');
SELECT has_function('pgbus', 'read_jobs', ARRAY['text[]', 'integer', 'integer', 'text', 'text', 'text', 'integer'],
                    'pgbus.read_jobs(text[], integer, integer, text, text, text, integer) exists');
SELECT is(pgbus.step_job_class(), 'pgbus.workflow:StepJob', 'step_job_class is pgbus.workflow:StepJob');

SELECT * FROM finish();
ROLLBACK;
