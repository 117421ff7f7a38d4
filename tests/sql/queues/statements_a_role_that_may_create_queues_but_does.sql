-- pgTAP tests for sql/functions/005_queue_functions.sql: A role that may create queues but does not own pgbus's functions: ensure_queue still works.
-- (Split from queue_functions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(3);
\ir ../include/queue_functions_setup.psql
-------------------------------------------------------------------------------------------------
-- A role that may create queues but does not own pgbus's functions: ensure_queue still works.
-------------------------------------------------------------------------------------------------
CREATE ROLE pgbus_qf_app;
GRANT USAGE, CREATE ON SCHEMA pgmq, pgbus TO pgbus_qf_app;
GRANT ALL ON ALL TABLES IN SCHEMA pgmq TO pgbus_qf_app;
GRANT ALL ON ALL SEQUENCES IN SCHEMA pgmq TO pgbus_qf_app;
SET LOCAL ROLE pgbus_qf_app;
SELECT is(pgbus.ensure_queue('qf_by_app'), true, 'ensure_queue by a role that cannot replace the functions creates the queue');
SELECT is(pgbus.queue_archive('qf_by_app', pgbus.queue_send('qf_by_app', '{}', clock_timestamp())), true,
          '... which works with the statement built on each call');
RESET ROLE;
SELECT ok(NOT pg_temp.has_branch('queue_send', 'qf_by_app'), '... until a refresh by the owner');

SELECT * FROM finish();
ROLLBACK;
