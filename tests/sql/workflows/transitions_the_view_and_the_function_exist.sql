-- pgTAP tests for sql/views/010_workflow_transitions.sql: The view and the function exist.
-- (Split from workflow_transitions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(5);
\ir ../include/workflow_transitions_setup.psql
-------------------------------------------------------------------------------------------------
-- The view and the function exist.
-------------------------------------------------------------------------------------------------
SELECT has_view('pgbus', 'workflow_transitions', 'the view pgbus.workflow_transitions exists');
SELECT columns_are('pgbus', 'workflow_transitions', ARRAY['kind', 'verb', 'from_status', 'to_status'],
                   'workflow_transitions has the columns kind, verb, from_status, to_status');
SELECT has_function('pgbus', 'workflow_transition', ARRAY['text', 'text', 'text'],
                    'pgbus.workflow_transition(text, text, text) exists');
SELECT function_returns('pgbus', 'workflow_transition', ARRAY['text', 'text', 'text'], 'text',
                        'pgbus.workflow_transition returns text');
SELECT is((SELECT count(*) FROM t_expected), 114::bigint, 'the expectation covers 6 statuses x 19 verbs = 114 cases');

SELECT * FROM finish();
ROLLBACK;
