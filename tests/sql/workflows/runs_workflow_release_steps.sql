-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_release_steps: a stopping worker hands back steps it read ahead.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(14);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_release_steps: a stopping worker hands back steps it read ahead
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'workflow_release_steps', ARRAY['bigint[]', 'text'],
                    'pgbus.workflow_release_steps(bigint[], text) exists');
DO $d$ BEGIN PERFORM pg_temp.go('rel', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:2'), 0,
          'workflow_release_steps: another worker''s attempt is left alone');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:1'), 1,
          'workflow_release_steps: the reading worker''s begun attempt goes back');
SELECT results_eq(
    $$SELECT w.status, s.status, s.started_at, s.worker, s.app_revision, s.ended_at
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('rel')$$,
    $$VALUES ('ready'::text, 'scheduled'::text, NULL::timestamptz, NULL::text, NULL::text, NULL::timestamptz)$$,
    'workflow_release_steps: the attempt is scheduled again, never started, and the run ready');
SELECT results_eq(
    $$SELECT event, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rel') ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('step_released'::text, 'its worker stopped'::text, '{"step": "a", "attempt": 1, "worker": "host:1"}'::jsonb)$$,
    'workflow_release_steps: a step_released event');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:1'), 0,
          'workflow_release_steps: a scheduled attempt is left alone (released once)');
UPDATE pgmq.q_t_wfr_rel SET vt = now();
SELECT is(pg_temp.read('rel_again', 'rel'), 1, 'workflow_release_steps: the message is read again');
SELECT is((pg_temp.ctx('rel_again') ->> 'step_id')::bigint, pg_temp.cur('rel'),
          'workflow_release_steps: and begins the same attempt afresh (no stall)');
-- Paused while it was read ahead: the attempt is superseded; resume sends the step again.
DO $d$ BEGIN PERFORM pg_temp.go('rel_paused', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('rel_paused'), 'pause') ->> 'status', 'paused', 'setup: paused');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel_paused')], 'host:1'), 1,
          'workflow_release_steps: an attempt of a paused run goes back too');
SELECT results_eq(
    $$SELECT w.status, s.status, s.ended_at IS NOT NULL FROM pgbus.workflows w
      JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('rel_paused')$$,
    $$VALUES ('paused'::text, 'superseded'::text, true)$$,
    'workflow_release_steps: a paused run stays paused, its attempt superseded');
SELECT is(pgbus.workflow_command(pg_temp.run('rel_paused'), 'resume') ->> 'status', 'ready',
          'workflow_release_steps: resume then sends the step again');
SELECT is(pg_temp.attempts('rel_paused'), 'a#1:superseded,a#2:scheduled', '... as a new attempt');
SELECT is(pgbus.workflow_release_steps(NULL, 'host:1'), 0, 'workflow_release_steps: NULL releases nothing');

SELECT * FROM finish();
ROLLBACK;
