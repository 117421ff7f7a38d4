-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: workflow_stuck (classes t_wfc_st_*).
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(9);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_stuck (classes t_wfc_st_*)
-------------------------------------------------------------------------------------------------
-- paused_error: a step failed.
DO $d$ BEGIN PERFORM pg_temp.go('st_error', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('st_error'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused', 'setup: st_error');
-- stalled: paused by the stall action.
DO $d$ BEGIN PERFORM pg_temp.go('st_stall', '[{"name": "a"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfc_st_stall', (pg_temp.att(pg_temp.cur('st_stall'))).msg_id, 0)$$, 'setup: st_stall message back');
SELECT is(pg_temp.read('st_stall_again', 'st_stall'), 1, 'setup: st_stall stalled');
-- stalled: running past its own timeout (60s), well within the threshold.
DO $d$ BEGIN PERFORM pg_temp.go('st_timeout', '[{"name": "a", "timeout": 60}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '2 minutes', scheduled_at = least(scheduled_at, now() - interval '2 minutes') WHERE step_id = pg_temp.cur('st_timeout');
-- stalled: running past the threshold (no timeout).
DO $d$ BEGIN PERFORM pg_temp.go('st_threshold', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes', scheduled_at = least(scheduled_at, now() - interval '20 minutes') WHERE step_id = pg_temp.cur('st_threshold');
-- healthy: running for 5 minutes; running 20 minutes with a timeout of an hour.
DO $d$ BEGIN PERFORM pg_temp.go('st_running_ok', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '5 minutes', scheduled_at = least(scheduled_at, now() - interval '5 minutes') WHERE step_id = pg_temp.cur('st_running_ok');
DO $d$ BEGIN PERFORM pg_temp.go('st_long_timeout', '[{"name": "a", "timeout": 3600}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes', scheduled_at = least(scheduled_at, now() - interval '20 minutes') WHERE step_id = pg_temp.cur('st_long_timeout');
-- paused_manual.
DO $d$ BEGIN PERFORM pg_temp.start('st_manual', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_manual', 'pause'); END $d$;
-- overdue: ready, due 10 minutes ago; healthy: due 2 minutes ago, due now.
DO $d$ BEGIN PERFORM pg_temp.start('st_overdue', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('st_overdue');
DO $d$ BEGIN PERFORM pg_temp.start('st_due', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '2 minutes' WHERE step_id = pg_temp.cur('st_due');
DO $d$ BEGIN PERFORM pg_temp.start('st_ready', '[{"name": "a"}]'); END $d$;
-- healthy: waiting, finished, cancelled.
DO $d$ BEGIN PERFORM pg_temp.start('st_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('st_waiting');
DO $d$ BEGIN PERFORM pg_temp.go('st_finished', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('st_finished'), 'finished') ->> 'status', 'finished', 'setup: st_finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '1 day' WHERE workflow_id = pg_temp.run('st_finished');
DO $d$ BEGIN PERFORM pg_temp.start('st_cancelled', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_cancelled', 'cancel'); END $d$;

SELECT set_eq(
    $$SELECT workflow_id, workflow_class, step_name, reason, error_class FROM pgbus.workflow_stuck()
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES (pg_temp.run('st_error'), 't_wfc_st_error', 'a', 'paused_error', 'app.Boom'),
             (pg_temp.run('st_stall'), 't_wfc_st_stall', 'a', 'stalled', 'pgbus.StepStalled'),
             (pg_temp.run('st_timeout'), 't_wfc_st_timeout', 'a', 'stalled', NULL),
             (pg_temp.run('st_threshold'), 't_wfc_st_threshold', 'a', 'stalled', NULL),
             (pg_temp.run('st_manual'), 't_wfc_st_manual', 'a', 'paused_manual', NULL),
             (pg_temp.run('st_overdue'), 't_wfc_st_overdue', 'a', 'overdue', NULL)$$,
    'workflow_stuck: each stuck run once with its reason (paused_error, stalled x3, paused_manual, overdue); healthy runs not');
SELECT results_eq(
    $$SELECT reason, since FROM pgbus.workflow_stuck() WHERE workflow_id IN (pg_temp.run('st_timeout'), pg_temp.run('st_overdue'))
      ORDER BY reason$$,
    $$VALUES ('overdue'::text, now() - interval '10 minutes'), ('stalled', now() - interval '2 minutes')$$,
    'workflow_stuck: since is when the step started (stalled) or was due (overdue)');
SELECT is((SELECT since FROM pgbus.workflow_stuck() WHERE workflow_id = pg_temp.run('st_manual')), (pg_temp.w('st_manual')).updated_at,
          'workflow_stuck: since is when a paused run was last updated');
SELECT set_eq(
    $$SELECT workflow_class, reason FROM pgbus.workflow_stuck(interval '30 minutes', interval '15 minutes')
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES ('t_wfc_st_error', 'paused_error'), ('t_wfc_st_stall', 'stalled'), ('t_wfc_st_timeout', 'stalled'),
             ('t_wfc_st_manual', 'paused_manual')$$,
    'workflow_stuck: a longer threshold and overdue_after leave out the 20-minute step and the 10-minute-late one (own timeout still counts)');
SELECT set_eq(
    $$SELECT workflow_class, reason FROM pgbus.workflow_stuck(interval '4 minutes', interval '1 minute')
      WHERE workflow_class LIKE 't\_wfc\_st\_%' AND reason IN ('stalled', 'overdue')$$,
    $$VALUES ('t_wfc_st_stall', 'stalled'), ('t_wfc_st_timeout', 'stalled'), ('t_wfc_st_threshold', 'stalled'),
             ('t_wfc_st_running_ok', 'stalled'), ('t_wfc_st_overdue', 'overdue'), ('t_wfc_st_due', 'overdue')$$,
    'workflow_stuck: a shorter threshold and overdue_after take in the 5-minute step and the 2-minute-late one');

SELECT * FROM finish();
ROLLBACK;
