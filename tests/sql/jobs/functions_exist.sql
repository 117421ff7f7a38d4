-- pgTAP tests for sql/functions/030_job_outcomes.sql: The functions exist.
-- (Split from job_outcomes.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(8);
\ir ../include/job_outcomes_setup.psql
-------------------------------------------------------------------------------------------------
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'lock_message', ARRAY['text', 'bigint'], 'pgbus.lock_message(text, bigint) exists');
SELECT has_function('pgbus', 'record_job_stat', ARRAY['text', 'jsonb', 'text', 'integer', 'bigint', 'integer'],
                    'pgbus.record_job_stat(text, jsonb, text, integer, bigint, integer) exists');
SELECT has_function('pgbus', 'job_succeeded', ARRAY['text', 'bigint', 'integer', 'bigint', 'boolean', 'boolean'],
                    'pgbus.job_succeeded(text, bigint, integer, bigint, boolean, boolean) exists');
SELECT has_function('pgbus', 'dead_letter', ARRAY['text', 'bigint', 'jsonb', 'boolean'],
                    'pgbus.dead_letter(text, bigint, jsonb, boolean) exists');
SELECT has_function('pgbus', 'job_failed', ARRAY['text', 'bigint', 'jsonb', 'jsonb', 'integer', 'boolean'],
                    'pgbus.job_failed(text, bigint, jsonb, jsonb, integer, boolean) exists');
SELECT has_function('pgbus', 'jobs_succeeded', ARRAY['text', 'bigint[]', 'integer[]', 'bigint[]', 'boolean'],
                    'pgbus.jobs_succeeded(text, bigint[], integer[], bigint[], boolean) exists');
SELECT function_returns('pgbus', 'jobs_succeeded', ARRAY['text', 'bigint[]', 'integer[]', 'bigint[]', 'boolean'], 'setof bigint',
                        'pgbus.jobs_succeeded returns setof bigint');
SELECT hasnt_function('pgbus', 'job_succeeded', ARRAY['text', 'bigint', 'integer', 'bigint', 'boolean'],
                      'the earlier pgbus.job_succeeded(text, bigint, integer, bigint, boolean) is gone');

SELECT * FROM finish();
ROLLBACK;
