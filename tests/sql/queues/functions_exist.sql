-- pgTAP tests for sql/functions/010_queues.sql: The functions exist with the documented signatures.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);

-- Scratch space for ids captured between statements (dropped by the ROLLBACK).
CREATE TEMP TABLE t_ids (name text, id bigint);
CREATE TEMP TABLE t_env (name text, env jsonb);
-- Runs a query returning one value and gives it as text, or the error it raised as 'ERROR: ...'
-- (so an unexpected error fails one test instead of aborting the whole file).
CREATE FUNCTION pg_temp.eval(query text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    result text;
BEGIN
    EXECUTE query INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR: ' || SQLERRM;
END;
$f$;

-------------------------------------------------------------------------------------------------
-- The functions exist with the documented signatures.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'ensure_queue', ARRAY['text', 'boolean'], 'pgbus.ensure_queue(text, boolean) exists');
SELECT has_function('pgbus', 'job_envelope', ARRAY['text', 'text', 'jsonb', 'timestamp with time zone', 'uuid'],
                    'pgbus.job_envelope(text, text, jsonb, timestamptz, uuid) exists');
SELECT has_function('pgbus', 'enqueue', ARRAY['text', 'text', 'jsonb[]', 'timestamp with time zone', 'uuid'],
                    'pgbus.enqueue(text, text, jsonb[], timestamptz, uuid) exists');
SELECT has_function('pgbus', 'read_jobs', ARRAY['text[]', 'integer', 'integer', 'text', 'text', 'text', 'integer'],
                    'pgbus.read_jobs(text[], integer, integer, text, text, text, integer) exists');
SELECT has_function('pgbus', 'extend_visibility', ARRAY['text', 'bigint[]', 'integer'],
                    'pgbus.extend_visibility(text, bigint[], integer) exists');
SELECT has_function('pgbus', 'retry_delay', ARRAY['integer', 'interval', 'interval', 'double precision'],
                    'pgbus.retry_delay(integer, interval, interval, float8) exists');

SELECT * FROM finish();
ROLLBACK;
