-- pgTAP tests for sql/functions/020_batches.sql: The functions exist.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'batch_open', ARRAY['text', 'jsonb', 'jsonb', 'jsonb', 'jsonb'],
                    'pgbus.batch_open(text, jsonb, jsonb, jsonb, jsonb) exists');
SELECT has_function('pgbus', 'batch_send_callbacks', ARRAY['pgbus.batches'],
                    'pgbus.batch_send_callbacks(pgbus.batches) exists');
SELECT has_function('pgbus', 'batch_finish_if_done', ARRAY['uuid'], 'pgbus.batch_finish_if_done(uuid) exists');
SELECT has_function('pgbus', 'batch_close', ARRAY['uuid'], 'pgbus.batch_close(uuid) exists');
SELECT has_function('pgbus', 'batch_member_done', ARRAY['uuid', 'text', 'integer'], 'pgbus.batch_member_done(uuid, text, integer) exists');
SELECT hasnt_function('pgbus', 'batch_member_done', ARRAY['uuid', 'text'], 'the earlier pgbus.batch_member_done(uuid, text) is gone');

SELECT * FROM finish();
ROLLBACK;
