-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: workflow_available_actions.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_available_actions
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('aa_ready', '[{"name": "a"}]'); END $d$;
-- (Scheduled in an earlier transaction: due before now().)
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '1 second' WHERE step_id = pg_temp.cur('aa_ready');
DO $d$ BEGIN PERFORM pg_temp.start('aa_later', '[{"name": "a", "wait": 600}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.go('aa_running', '[{"name": "a"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.start('aa_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('aa_waiting');
DO $d$ BEGIN PERFORM pg_temp.start('aa_paused', '[{"name": "a"}]'); PERFORM pg_temp.cmd('aa_paused', 'pause'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.go('aa_finished', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('aa_finished'), 'finished') ->> 'status', 'finished', 'setup: finished');
DO $d$ BEGIN PERFORM pg_temp.start('aa_cancelled', '[{"name": "a"}]'); PERFORM pg_temp.cmd('aa_cancelled', 'cancel'); END $d$;
SELECT results_eq(
    $$SELECT n, pgbus.workflow_available_actions(pg_temp.run(n))
      FROM unnest(ARRAY['aa_ready', 'aa_later', 'aa_running', 'aa_waiting', 'aa_paused', 'aa_finished', 'aa_cancelled']) WITH ORDINALITY u(n, i)
      ORDER BY i$$,
    $$VALUES ('aa_ready', '{reschedule,signal,pause,cancel}'::text[]),
             ('aa_later', '{run_now,reschedule,signal,pause,cancel}'),
             ('aa_running', '{signal,pause,cancel}'),
             ('aa_waiting', '{skip,signal,pause,cancel}'),
             ('aa_paused', '{resume,resume_at,signal,cancel}'),
             ('aa_finished', '{rerun}'),
             ('aa_cancelled', '{rerun}')$$,
    'workflow_available_actions: per status; run_now only when the scheduled step is in the future');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('aa_ready')), '{reschedule,signal,pause,cancel}'::text[],
          'workflow_available_actions: a ready run whose step is due has no run_now');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('aa_later')), '{run_now,reschedule,signal,pause,cancel}'::text[],
          'workflow_available_actions: a ready run whose step is later has run_now');
SELECT is(pgbus.workflow_available_actions(gen_random_uuid()), '{}'::text[], 'workflow_available_actions: an unknown run has none');
-- Each offered action is accepted (not refused as not_allowed).
SELECT is((SELECT count(*) FROM unnest(ARRAY['aa_ready', 'aa_later', 'aa_running', 'aa_waiting', 'aa_paused', 'aa_finished', 'aa_cancelled']) n,
                 unnest(pgbus.workflow_available_actions(pg_temp.run(n))) v
           WHERE pgbus.workflow_transition('outside', v, (pg_temp.w(n)).status) IS NULL), 0::bigint,
          'workflow_available_actions: offers only verbs the transition table allows');

SELECT * FROM finish();
ROLLBACK;
