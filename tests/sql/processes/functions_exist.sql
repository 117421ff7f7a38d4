-- pgTAP tests for sql/functions/040_processes.sql and sql/functions/050_maintenance.sql: The functions exist.
-- (Split from processes_and_maintenance.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);

-- Start from empty tables so the cleanup counts are exact (undone by the ROLLBACK).
DELETE FROM pgbus.processes;
DELETE FROM pgbus.batches;
DELETE FROM pgbus.job_stats;

CREATE TEMP TABLE t_p (name text PRIMARY KEY, id bigint);
CREATE TEMP TABLE t_b (name text PRIMARY KEY, id uuid);
CREATE FUNCTION pg_temp.p(name text) RETURNS bigint LANGUAGE sql AS $f$ SELECT id FROM t_p WHERE t_p.name = $1 $f$;
CREATE FUNCTION pg_temp.b(name text) RETURNS uuid LANGUAGE sql AS $f$ SELECT id FROM t_b WHERE t_b.name = $1 $f$;

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
