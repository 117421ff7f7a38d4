-- pgTAP tests for sql/functions/040_processes.sql and sql/functions/050_maintenance.sql: The functions exist.
-- (Split from processes_and_maintenance.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/processes_and_maintenance_setup.psql
-------------------------------------------------------------------------------------------------
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'process_register', ARRAY['text', 'text', 'integer', 'text', 'jsonb'],
                    'pgbus.process_register(text, text, integer, text, jsonb) exists');
SELECT has_function('pgbus', 'process_heartbeat', ARRAY['bigint', 'jsonb'], 'pgbus.process_heartbeat(bigint, jsonb) exists');
SELECT has_function('pgbus', 'process_deregister', ARRAY['bigint'], 'pgbus.process_deregister(bigint) exists');
SELECT has_function('pgbus', 'cleanup_batches', ARRAY['interval'], 'pgbus.cleanup_batches(interval) exists');
SELECT has_function('pgbus', 'prune_stale_processes', ARRAY['interval'], 'pgbus.prune_stale_processes(interval) exists');
SELECT has_function('pgbus', 'cleanup_job_stats', ARRAY['interval'], 'pgbus.cleanup_job_stats(interval) exists');

SELECT * FROM finish();
ROLLBACK;
