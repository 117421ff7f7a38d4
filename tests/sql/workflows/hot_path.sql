-- pgTAP tests for the step hot path's schema (sql/schema/0004_workflow_hot_path.sql): the
-- CHECKs (now one function per table) allow and refuse what they did, and a step's updates of
-- its run and attempt rows can be HOT (no index names a column they change).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(25);

CREATE FUNCTION pg_temp.run_row(status text, pause_cause text DEFAULT NULL, ended boolean DEFAULT false)
RETURNS text LANGUAGE sql AS $f$
    SELECT format($$INSERT INTO pgbus.workflows (workflow_class, definition_digest, status, pause_cause, ended_at)
                    VALUES ('t_hot_rows', 'd1', %L, %L, %s)$$,
                  status, pause_cause, CASE WHEN ended THEN 'now()' ELSE 'NULL' END)
$f$;

-------------------------------------------------------------------------------------------------
-- The CHECKs: every allowed value is accepted, anything else is a check_violation.
-------------------------------------------------------------------------------------------------
SELECT lives_ok(pg_temp.run_row('ready'), 'workflows.status: ready is allowed');
SELECT lives_ok(pg_temp.run_row('running'), 'workflows.status: running is allowed');
SELECT lives_ok(pg_temp.run_row('waiting'), 'workflows.status: waiting is allowed');
SELECT lives_ok(pg_temp.run_row('finished', ended => true), 'workflows.status: finished is allowed');
SELECT lives_ok(pg_temp.run_row('cancelled', ended => true), 'workflows.status: cancelled is allowed');
SELECT lives_ok(pg_temp.run_row('paused', 'error'), 'workflows.pause_cause: error is allowed');
SELECT lives_ok(pg_temp.run_row('paused', 'manual'), 'workflows.pause_cause: manual is allowed');
SELECT lives_ok(pg_temp.run_row('paused', 'stall'), 'workflows.pause_cause: stall is allowed');
SELECT throws_ok(pg_temp.run_row('sleeping'), '23514', NULL, 'workflows.status: another value is refused');
SELECT throws_ok(pg_temp.run_row('paused', 'tired'), '23514', NULL, 'workflows.pause_cause: another value is refused');
SELECT throws_ok(pg_temp.run_row('paused'), '23514', NULL, 'workflows: paused needs a pause cause (unchanged)');
SELECT throws_ok(pg_temp.run_row('finished'), '23514', NULL, 'workflows: finished needs ended_at (unchanged)');
SELECT throws_ok(pg_temp.run_row('running', ended => true), '23514', NULL, 'workflows: an ongoing run has no ended_at (unchanged)');
SELECT throws_ok($$INSERT INTO pgbus.workflows (workflow_class, definition_digest, subject_type) VALUES ('t_hot_rows', 'd1', 'User')$$,
                 '23514', NULL, 'workflows: a subject type needs a subject id (unchanged)');
SELECT throws_ok($$INSERT INTO pgbus.workflows (workflow_class, definition_digest, arguments) VALUES ('t_hot_rows', 'd1', '[1]')$$,
                 '23514', NULL, 'workflows: arguments are a JSON object (unchanged)');
SELECT throws_ok(
    $$UPDATE pgbus.workflows SET status = 'Ready' WHERE workflow_class = 't_hot_rows' AND status = 'ready'$$,
    '23514', NULL, 'workflows.status: an update to another value is refused');

SELECT lives_ok(
    $$INSERT INTO pgbus.workflow_steps (workflow_id, step_name, queue, status)
      SELECT w.workflow_id, 'a', 'q', v
      FROM (SELECT workflow_id FROM pgbus.workflows WHERE workflow_class = 't_hot_rows' LIMIT 1) w,
           unnest(ARRAY['scheduled', 'running', 'completed', 'skipped', 'failed', 'interrupted',
                        'cancelled', 'stalled', 'superseded']) v$$,
    'workflow_steps.status: the nine attempt statuses are allowed');
SELECT throws_ok(
    $$INSERT INTO pgbus.workflow_steps (workflow_id, step_name, queue, status)
      SELECT workflow_id, 'a', 'q', 'sleeping' FROM pgbus.workflows WHERE workflow_class = 't_hot_rows' LIMIT 1$$,
    '23514', NULL, 'workflow_steps.status: another value is refused');
SELECT throws_ok(
    $$INSERT INTO pgbus.workflow_steps (workflow_id, step_name, queue, attempt)
      SELECT workflow_id, 'a', 'q', 0 FROM pgbus.workflows WHERE workflow_class = 't_hot_rows' LIMIT 1$$,
    '23514', NULL, 'workflow_steps.attempt: 0 is refused (unchanged)');

-------------------------------------------------------------------------------------------------
-- HOT: no index (key, expression or predicate) names a column a step changes.
-------------------------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.indexes_naming(tbl regclass, cols text[]) RETURNS text LANGUAGE sql AS $f$
    SELECT coalesce(string_agg(c.relname, ',' ORDER BY c.relname), '')
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = $1
      AND pg_get_indexdef(i.indexrelid) ~ ('\m(' || array_to_string($2, '|') || ')\M')
$f$;
SELECT is(pg_temp.indexes_naming('pgbus.workflows', ARRAY['status', 'updated_at', 'current_step', 'current_step_id']), '',
          'no index on workflows names status, updated_at or the current step');
SELECT is(pg_temp.indexes_naming('pgbus.workflow_steps', ARRAY['status', 'started_at', 'worker', 'app_revision']), '',
          'no index on workflow_steps names what beginning an attempt changes');

-- A step, begun and ended as a worker does: its run row's updates are HOT.
SELECT pgbus.workflow_register('t_hot_flow', '[{"name": "a"}, {"name": "b"}]', 'd1', 't_hot_flow');
SELECT pgbus.workflow_start('t_hot_flow');
CREATE TEMP TABLE t_read AS SELECT * FROM pgbus.read_jobs(ARRAY['t_hot_flow'], 30, 1, 'host:1', 'rev');
SELECT is((SELECT count(*) FROM t_read WHERE context IS NOT NULL), 1::bigint, 'setup: the first step begins');
SELECT is(pgbus.workflow_end_step((SELECT (context ->> 'step_id')::bigint FROM t_read), 'complete') ->> 'status',
          'ready', 'setup: the first step completes and the second is scheduled');
SELECT cmp_ok((SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'pgbus.workflows'::regclass), '>=', 2::bigint,
              'the run row''s updates of a step (begin, next step scheduled) are HOT');
SELECT cmp_ok((SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'pgbus.workflow_steps'::regclass), '>=', 1::bigint,
              'beginning an attempt updates its row HOT');

SELECT * FROM finish();
ROLLBACK;
