-- pgTAP tests for sql/views/010_workflow_transitions.sql: The whole table at once.
-- (Split from workflow_transitions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(5);
\ir ../include/workflow_transitions_setup.psql
-------------------------------------------------------------------------------------------------
-- The whole table at once.
-------------------------------------------------------------------------------------------------
SELECT results_eq(
    $$SELECT kind, verb, from_status, pgbus.workflow_transition(kind, verb, from_status)
      FROM t_expected ORDER BY pg_temp.verb_ord(kind, verb), pg_temp.status_ord(from_status)$$,
    $$SELECT kind, verb, from_status, to_status
      FROM t_expected ORDER BY pg_temp.verb_ord(kind, verb), pg_temp.status_ord(from_status)$$,
    'workflow_transition: every (kind, verb, status) answers the expected to_status or NULL');
SELECT set_eq(
    $$SELECT kind, verb, from_status, to_status FROM pgbus.workflow_transitions$$,
    $$SELECT kind, verb, from_status, to_status FROM t_expected WHERE to_status IS NOT NULL$$,
    'workflow_transitions holds exactly the allowed transitions of the expectation');
SELECT is((SELECT count(*) FROM (SELECT kind, verb, from_status FROM pgbus.workflow_transitions
                                 GROUP BY 1, 2, 3 HAVING count(*) > 1) d), 0::bigint,
          'workflow_transitions has at most one row per (kind, verb, from_status)');
SELECT set_eq($$SELECT DISTINCT kind FROM pgbus.workflow_transitions$$, $$VALUES ('runner'), ('outside')$$,
              'workflow_transitions kinds are runner and outside');
SELECT is((SELECT count(*) FROM pgbus.workflow_transitions
           WHERE from_status NOT IN ('ready', 'running', 'waiting', 'paused', 'finished', 'cancelled')
              OR to_status NOT IN ('ready', 'running', 'waiting', 'paused', 'finished', 'cancelled')),
          0::bigint, 'workflow_transitions names only statuses a run can have');

SELECT * FROM finish();
ROLLBACK;
