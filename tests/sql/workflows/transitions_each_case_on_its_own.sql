-- pgTAP tests for sql/views/010_workflow_transitions.sql: Each case on its own (114 tests).
-- (Split from workflow_transitions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(114);
\ir ../include/workflow_transitions_setup.psql
-------------------------------------------------------------------------------------------------
-- Each case on its own (114 tests).
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.workflow_transition(kind, verb, from_status), to_status,
          format('workflow_transition(%s, %s, %s) is %s', kind, verb, from_status, coalesce(to_status, 'NULL (refused)')))
FROM t_expected ORDER BY pg_temp.verb_ord(kind, verb), pg_temp.status_ord(from_status);

SELECT * FROM finish();
ROLLBACK;
