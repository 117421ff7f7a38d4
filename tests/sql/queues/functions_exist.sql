-- pgTAP tests for sql/functions/010_queues.sql: The functions exist with the documented signatures.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/queues_setup.psql
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
