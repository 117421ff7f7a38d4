-- pgTAP tests for sql/functions/005_queue_functions.sql: The functions exist with the documented signatures.
-- (Split from queue_functions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(4);
\ir ../include/queue_functions_setup.psql
-------------------------------------------------------------------------------------------------
-- The functions exist with the documented signatures.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'queue_functions_refresh', ARRAY[]::text[], 'pgbus.queue_functions_refresh() exists');
SELECT has_function('pgbus', 'queue_send', ARRAY['text', 'jsonb', 'timestamp with time zone'],
                    'pgbus.queue_send(text, jsonb, timestamptz) exists');
SELECT has_function('pgbus', 'queue_read', ARRAY['text', 'integer', 'integer'],
                    'pgbus.queue_read(text, integer, integer) exists');
SELECT has_function('pgbus', 'queue_archive', ARRAY['text', 'bigint'], 'pgbus.queue_archive(text, bigint) exists');

SELECT * FROM finish();
ROLLBACK;
