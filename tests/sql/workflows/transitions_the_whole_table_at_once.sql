-- pgTAP tests for sql/views/010_workflow_transitions.sql: The whole table at once.
-- (Split from workflow_transitions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(5);

-------------------------------------------------------------------------------------------------
-- The expectation, written out: 6 statuses x (10 runner verbs + 9 outside verbs) = 114 rows;
-- to_status NULL means refused.
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE t_expected (kind text, verb text, from_status text, to_status text,
                              PRIMARY KEY (kind, verb, from_status));
INSERT INTO t_expected (kind, verb, from_status, to_status) VALUES
    -- runner verbs, said by a step from inside its attempt
    ('runner',  'complete',   'ready',     NULL),
    ('runner',  'complete',   'running',   'ready'),
    ('runner',  'complete',   'waiting',   NULL),
    ('runner',  'complete',   'paused',    'paused'),
    ('runner',  'complete',   'finished',  NULL),
    ('runner',  'complete',   'cancelled', NULL),
    ('runner',  'skip',       'ready',     NULL),
    ('runner',  'skip',       'running',   'ready'),
    ('runner',  'skip',       'waiting',   NULL),
    ('runner',  'skip',       'paused',    'paused'),
    ('runner',  'skip',       'finished',  NULL),
    ('runner',  'skip',       'cancelled', NULL),
    ('runner',  'reattempt',  'ready',     NULL),
    ('runner',  'reattempt',  'running',   'ready'),
    ('runner',  'reattempt',  'waiting',   NULL),
    ('runner',  'reattempt',  'paused',    'paused'),
    ('runner',  'reattempt',  'finished',  NULL),
    ('runner',  'reattempt',  'cancelled', NULL),
    ('runner',  'pause',      'ready',     NULL),
    ('runner',  'pause',      'running',   'paused'),
    ('runner',  'pause',      'waiting',   NULL),
    ('runner',  'pause',      'paused',    'paused'),
    ('runner',  'pause',      'finished',  NULL),
    ('runner',  'pause',      'cancelled', NULL),
    ('runner',  'cancel',     'ready',     NULL),
    ('runner',  'cancel',     'running',   'cancelled'),
    ('runner',  'cancel',     'waiting',   NULL),
    ('runner',  'cancel',     'paused',    'cancelled'),
    ('runner',  'cancel',     'finished',  NULL),
    ('runner',  'cancel',     'cancelled', NULL),
    ('runner',  'finished',   'ready',     NULL),
    ('runner',  'finished',   'running',   'finished'),
    ('runner',  'finished',   'waiting',   NULL),
    ('runner',  'finished',   'paused',    'finished'),
    ('runner',  'finished',   'finished',  NULL),
    ('runner',  'finished',   'cancelled', NULL),
    -- waiting steps: park / rewait at a gate or on a batch; wake, resolve from the signal or batch
    ('runner',  'park',       'ready',     NULL),
    ('runner',  'park',       'running',   'waiting'),
    ('runner',  'park',       'waiting',   NULL),
    ('runner',  'park',       'paused',    'paused'),
    ('runner',  'park',       'finished',  NULL),
    ('runner',  'park',       'cancelled', NULL),
    ('runner',  'rewait',     'ready',     NULL),
    ('runner',  'rewait',     'running',   'waiting'),
    ('runner',  'rewait',     'waiting',   NULL),
    ('runner',  'rewait',     'paused',    'paused'),
    ('runner',  'rewait',     'finished',  NULL),
    ('runner',  'rewait',     'cancelled', NULL),
    ('runner',  'wake',       'ready',     NULL),
    ('runner',  'wake',       'running',   NULL),
    ('runner',  'wake',       'waiting',   'ready'),
    ('runner',  'wake',       'paused',    NULL),
    ('runner',  'wake',       'finished',  NULL),
    ('runner',  'wake',       'cancelled', NULL),
    ('runner',  'resolve',    'ready',     NULL),
    ('runner',  'resolve',    'running',   NULL),
    ('runner',  'resolve',    'waiting',   'ready'),
    ('runner',  'resolve',    'paused',    NULL),
    ('runner',  'resolve',    'finished',  NULL),
    ('runner',  'resolve',    'cancelled', NULL),
    -- outside verbs, said by an operator, the app or an agent
    ('outside', 'pause',      'ready',     'paused'),
    ('outside', 'pause',      'running',   'paused'),
    ('outside', 'pause',      'waiting',   'paused'),
    ('outside', 'pause',      'paused',    NULL),
    ('outside', 'pause',      'finished',  NULL),
    ('outside', 'pause',      'cancelled', NULL),
    ('outside', 'cancel',     'ready',     'cancelled'),
    ('outside', 'cancel',     'running',   'cancelled'),
    ('outside', 'cancel',     'waiting',   'cancelled'),
    ('outside', 'cancel',     'paused',    'cancelled'),
    ('outside', 'cancel',     'finished',  NULL),
    ('outside', 'cancel',     'cancelled', NULL),
    ('outside', 'resume',     'ready',     NULL),
    ('outside', 'resume',     'running',   NULL),
    ('outside', 'resume',     'waiting',   NULL),
    ('outside', 'resume',     'paused',    'ready'),
    ('outside', 'resume',     'finished',  NULL),
    ('outside', 'resume',     'cancelled', NULL),
    ('outside', 'resume_at',  'ready',     NULL),
    ('outside', 'resume_at',  'running',   NULL),
    ('outside', 'resume_at',  'waiting',   NULL),
    ('outside', 'resume_at',  'paused',    'ready'),
    ('outside', 'resume_at',  'finished',  NULL),
    ('outside', 'resume_at',  'cancelled', NULL),
    ('outside', 'run_now',    'ready',     'ready'),
    ('outside', 'run_now',    'running',   NULL),
    ('outside', 'run_now',    'waiting',   NULL),
    ('outside', 'run_now',    'paused',    NULL),
    ('outside', 'run_now',    'finished',  NULL),
    ('outside', 'run_now',    'cancelled', NULL),
    ('outside', 'reschedule', 'ready',     'ready'),
    ('outside', 'reschedule', 'running',   NULL),
    ('outside', 'reschedule', 'waiting',   NULL),
    ('outside', 'reschedule', 'paused',    NULL),
    ('outside', 'reschedule', 'finished',  NULL),
    ('outside', 'reschedule', 'cancelled', NULL),
    ('outside', 'skip',       'ready',     NULL),
    ('outside', 'skip',       'running',   NULL),
    ('outside', 'skip',       'waiting',   'ready'),
    ('outside', 'skip',       'paused',    NULL),
    ('outside', 'skip',       'finished',  NULL),
    ('outside', 'skip',       'cancelled', NULL),
    ('outside', 'signal',     'ready',     'ready'),
    ('outside', 'signal',     'running',   'running'),
    ('outside', 'signal',     'waiting',   'waiting'),
    ('outside', 'signal',     'paused',    'paused'),
    ('outside', 'signal',     'finished',  NULL),
    ('outside', 'signal',     'cancelled', NULL),
    ('outside', 'rerun',      'ready',     NULL),
    ('outside', 'rerun',      'running',   NULL),
    ('outside', 'rerun',      'waiting',   NULL),
    ('outside', 'rerun',      'paused',    NULL),
    ('outside', 'rerun',      'finished',  'finished'),
    ('outside', 'rerun',      'cancelled', 'cancelled');

-- Order for reading results: statuses and verbs in their natural order.
CREATE FUNCTION pg_temp.status_ord(s text) RETURNS integer LANGUAGE sql IMMUTABLE AS $f$
    SELECT array_position(ARRAY['ready', 'running', 'waiting', 'paused', 'finished', 'cancelled'], s)
$f$;
CREATE FUNCTION pg_temp.verb_ord(k text, v text) RETURNS integer LANGUAGE sql IMMUTABLE AS $f$
    SELECT CASE k WHEN 'runner' THEN array_position(ARRAY['complete', 'skip', 'reattempt', 'pause', 'cancel', 'finished',
                                                                  'park', 'rewait', 'wake', 'resolve'], v)
                  ELSE 20 + array_position(ARRAY['pause', 'cancel', 'resume', 'resume_at', 'run_now', 'reschedule',
                                                 'skip', 'signal', 'rerun'], v) END
$f$;

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
