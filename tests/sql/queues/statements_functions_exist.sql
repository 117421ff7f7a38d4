-- pgTAP tests for sql/functions/005_queue_functions.sql: The functions exist with the documented signatures.
-- (Split from queue_functions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(4);

CREATE TEMP TABLE t_ids (name text, id bigint);
-- Whether `fn`'s body has a statement of its own for `queue`'s table.
CREATE FUNCTION pg_temp.has_branch(fn text, queue text) RETURNS boolean LANGUAGE sql AS $f$
    SELECT prosrc LIKE format('%%WHEN %L THEN%%', queue) FROM pg_proc
    WHERE oid = ('pgbus.' || fn)::regproc
$f$;

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
