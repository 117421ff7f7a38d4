-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: workflow_sweep (from no runs at all, so that its counts are exact; undone by the ROLLBACK).
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(41);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_sweep (from no runs at all, so that its counts are exact; undone by the ROLLBACK)
-------------------------------------------------------------------------------------------------
DELETE FROM pgbus.workflows;
SELECT is(pgbus.workflow_sweep(), '{"stalled": [], "timed_out": [], "resolved": 0, "resent": 0, "deleted": 0, "failures_forgotten": 0,
                                     "moved": [], "failed": [], "runs": [], "stuck": []}'::jsonb,
          'workflow_sweep: with no runs it does nothing and answers empty gauges');

-- To stall: past the threshold; past its timeout; paused by an operator while running past the threshold.
DO $d$ BEGIN PERFORM pg_temp.go('sw_stall', '[{"name": "a"}, {"name": "b"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_stall');
DO $d$ BEGIN PERFORM pg_temp.go('sw_timeout', '[{"name": "a", "timeout": 60}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '2 minutes' WHERE step_id = pg_temp.cur('sw_timeout');
DO $d$ BEGIN PERFORM pg_temp.go('sw_paused', '[{"name": "a"}]'); PERFORM pg_temp.cmd('sw_paused', 'pause'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_paused');
-- Not to stall: running for a minute.
DO $d$ BEGIN PERFORM pg_temp.go('sw_fresh', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '1 minute' WHERE step_id = pg_temp.cur('sw_fresh');
-- To resend: due 10 minutes ago, its message lost. Not to resend: its message is there; lost but due only now.
DO $d$ BEGIN PERFORM pg_temp.start('sw_lost', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('sw_lost');
SELECT pg_temp.mark('sw_lost_msg', to_jsonb((pg_temp.att(pg_temp.cur('sw_lost'))).msg_id));
SELECT is(pgmq.delete('t_wfc_sw_lost', (pg_temp.marked('sw_lost_msg'))::bigint), true, 'setup: sw_lost''s message is lost');
DO $d$ BEGIN PERFORM pg_temp.start('sw_kept', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('sw_kept');
SELECT pg_temp.mark('sw_kept_msg', to_jsonb((pg_temp.att(pg_temp.cur('sw_kept'))).msg_id));
DO $d$ BEGIN PERFORM pg_temp.start('sw_recent', '[{"name": "a"}]'); END $d$;
SELECT is(pgmq.delete('t_wfc_sw_recent', (pg_temp.att(pg_temp.cur('sw_recent'))).msg_id), true, 'setup: sw_recent''s message is lost');
-- To delete: finished 40 days ago, cancelled 40 days ago. To keep: finished 10 days ago; paused long ago.
DO $d$ BEGIN PERFORM pg_temp.go('sw_old_fin', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('sw_old_fin'), 'finished') ->> 'status', 'finished', 'setup: sw_old_fin finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '40 days' WHERE workflow_id = pg_temp.run('sw_old_fin');
DO $d$ BEGIN PERFORM pg_temp.start('sw_old_can', '[{"name": "a"}]'); PERFORM pg_temp.cmd('sw_old_can', 'cancel'); END $d$;
UPDATE pgbus.workflows SET ended_at = now() - interval '40 days' WHERE workflow_id = pg_temp.run('sw_old_can');
DO $d$ BEGIN PERFORM pg_temp.go('sw_young_fin', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('sw_young_fin'), 'finished') ->> 'status', 'finished', 'setup: sw_young_fin finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '10 days' WHERE workflow_id = pg_temp.run('sw_young_fin');
DO $d$ BEGIN PERFORM pg_temp.start('sw_old_paused', '[{"name": "a"}]'); PERFORM pg_temp.cmd('sw_old_paused', 'pause'); END $d$;
UPDATE pgbus.workflows SET created_at = now() - interval '90 days', updated_at = now() - interval '90 days'
WHERE workflow_id = pg_temp.run('sw_old_paused');
-- A rerun of the run to delete outlives it.
INSERT INTO t_runs SELECT 'sw_child', (pg_temp.cmd('sw_old_fin', 'rerun') ->> 'workflow_id')::uuid, NULL;
SELECT isnt(pg_temp.run('sw_child'), NULL, 'setup: sw_old_fin rerun');
SELECT pg_temp.mark('sw_old_fin_steps', to_jsonb((SELECT array_agg(step_id) FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('sw_old_fin'))));
SELECT pg_temp.mark('sw_ev', to_jsonb(pg_temp.last_event_id()));

SELECT pg_temp.mark('sweep1', pgbus.workflow_sweep());
SELECT set_eq(
    $$SELECT e - 'was' - 'status' - 'error_class' FROM jsonb_array_elements(pg_temp.marked('sweep1') -> 'stalled') e$$,
    $$VALUES (jsonb_build_object('workflow_id', pg_temp.run('sw_stall'), 'workflow_class', 't_wfc_sw_stall', 'step', 'a', 'action', 'pause')),
             (jsonb_build_object('workflow_id', pg_temp.run('sw_timeout'), 'workflow_class', 't_wfc_sw_timeout', 'step', 'a', 'action', 'pause')),
             (jsonb_build_object('workflow_id', pg_temp.run('sw_paused'), 'workflow_class', 't_wfc_sw_paused', 'step', 'a', 'action', 'pause'))$$,
    'workflow_sweep: "stalled" lists the runs it stalled, with step and action');
SELECT is(pg_temp.marked('sweep1') -> 'resent', '1'::jsonb, 'workflow_sweep: "resent" counts one lost message sent again');
SELECT is(pg_temp.marked('sweep1') -> 'deleted', '2'::jsonb, 'workflow_sweep: "deleted" counts two old ended runs');

-- Stalls.
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('sw_stall')$$,
                  $$VALUES ('paused'::text, 'stall'::text)$$, 'workflow_sweep: a step past the threshold: the run is paused (stall)');
SELECT results_eq(
    $$SELECT status, outcome, error_class, error ->> 'message', ended_at IS NOT NULL FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('sw_stall')$$,
    $$VALUES ('stalled'::text, 'pause'::text, 'pgbus.StepStalled'::text, 'step a ran longer than the stall threshold'::text, true)$$,
    'workflow_sweep: ... its attempt is stalled (ran longer than the stall threshold)');
SELECT results_eq(
    $$SELECT event, actor, details FROM pgbus.workflow_events
      WHERE workflow_id = pg_temp.run('sw_stall') AND event_id > (pg_temp.marked('sw_ev'))::bigint ORDER BY event_id$$,
    $$VALUES ('stall_detected'::text, 'pgbus'::text, '{"detection": "sweep", "action": "pause", "step": "a"}'::jsonb),
             ('paused', 'pgbus', '{}')$$,
    'workflow_sweep: ... events stall_detected (detection sweep) and paused, by pgbus');
SELECT results_eq(
    $$SELECT w.status, s.status, s.error ->> 'message' FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_timeout')$$,
    $$VALUES ('paused'::text, 'stalled'::text, 'step a ran longer than 00:01:00'::text)$$,
    'workflow_sweep: a step past its own timeout is stalled too');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_paused')$$,
    $$VALUES ('paused'::text, 'manual'::text, 'stalled'::text)$$,
    'workflow_sweep: on a run paused by an operator the attempt is stalled and the run stays paused (manual)');
SELECT is(pg_temp.attempts('sw_fresh'), 'a#1:running', 'workflow_sweep: a step running for a minute is left alone');
SELECT is((pg_temp.w('sw_fresh')).status, 'running', 'workflow_sweep: ... its run still running');

-- Resends.
SELECT isnt((pg_temp.att(pg_temp.cur('sw_lost'))).msg_id, (pg_temp.marked('sw_lost_msg'))::bigint,
            'workflow_sweep: a lost message is sent again with a new msg_id');
SELECT results_eq(
    $$SELECT (m).message ->> 'job_class', (m).message -> 'kwargs', (m).vt <= clock_timestamp()
      FROM (SELECT pg_temp.amsg(pg_temp.cur('sw_lost')) AS m) x$$,
    $$VALUES (pgbus.step_job_class(), jsonb_build_object('workflow_id', pg_temp.run('sw_lost'), 'step_id', pg_temp.cur('sw_lost')), true)$$,
    'workflow_sweep: ... the new message is the StepJob of the same attempt, visible now');
SELECT is(pg_temp.attempts('sw_lost'), 'a#1:scheduled', 'workflow_sweep: ... the same attempt, no new one');
SELECT results_eq($$SELECT event, actor, reason, details FROM pgbus.workflow_events
                    WHERE workflow_id = pg_temp.run('sw_lost') AND event_id > (pg_temp.marked('sw_ev'))::bigint$$,
                  $$VALUES ('step_resent'::text, 'pgbus'::text, 'its message was lost'::text, '{"step": "a"}'::jsonb)$$,
                  'workflow_sweep: ... a step_resent event by pgbus');
SELECT is((pg_temp.att(pg_temp.cur('sw_kept'))).msg_id, (pg_temp.marked('sw_kept_msg'))::bigint,
          'workflow_sweep: a scheduled step whose message exists is not sent again');
SELECT is(pg_temp.events('sw_kept', (pg_temp.marked('sw_ev'))::bigint), '', 'workflow_sweep: ... no event');
SELECT is(pg_temp.has_amsg(pg_temp.cur('sw_recent')), false, 'workflow_sweep: a lost message of a step due only now is not sent yet');
SELECT is(pg_temp.read('sw_lost', 'sw_lost'), 1, 'workflow_sweep: the resent step is read');
SELECT is(pg_temp.ctx('sw_lost') ->> 'step_id', pg_temp.cur('sw_lost')::text, 'workflow_sweep: ... and begins its attempt');

-- Retention.
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_id IN (pg_temp.run('sw_old_fin'), pg_temp.run('sw_old_can'))), 0::bigint,
          'workflow_sweep: finished and cancelled runs older than the retention are deleted');
SELECT is((SELECT count(*) FROM pgbus.workflow_steps WHERE workflow_id IN (pg_temp.run('sw_old_fin'), pg_temp.run('sw_old_can'))
              OR step_id = ANY (ARRAY(SELECT jsonb_array_elements_text(pg_temp.marked('sw_old_fin_steps')))::bigint[])), 0::bigint,
          'workflow_sweep: ... with their attempts');
SELECT is((SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id IN (pg_temp.run('sw_old_fin'), pg_temp.run('sw_old_can'))), 0::bigint,
          'workflow_sweep: ... and their events');
SELECT results_eq($$SELECT status FROM pgbus.workflows WHERE workflow_id IN (pg_temp.run('sw_young_fin'), pg_temp.run('sw_old_paused')) ORDER BY status$$,
                  $$VALUES ('finished'::text), ('paused')$$,
                  'workflow_sweep: a run finished 10 days ago and an old paused run are kept');
SELECT results_eq($$SELECT status, rerun_of FROM pgbus.workflows WHERE workflow_id = pg_temp.run('sw_child')$$,
                  $$VALUES ('ready'::text, NULL::uuid)$$, 'workflow_sweep: a rerun of a deleted run is kept, rerun_of cleared');

-- The gauges (as they were after the sweep's work).
SELECT set_eq(
    $$SELECT e ->> 'workflow_class' AS c, e ->> 'status' AS s, (e ->> 'count')::int AS n FROM jsonb_array_elements(pg_temp.marked('sweep1') -> 'runs') e$$,
    $$VALUES ('t_wfc_sw_stall', 'paused', 1), ('t_wfc_sw_timeout', 'paused', 1), ('t_wfc_sw_paused', 'paused', 1),
             ('t_wfc_sw_fresh', 'running', 1), ('t_wfc_sw_lost', 'ready', 1), ('t_wfc_sw_kept', 'ready', 1),
             ('t_wfc_sw_recent', 'ready', 1), ('t_wfc_sw_old_paused', 'paused', 1), ('t_wfc_sw_old_fin', 'ready', 1)$$,
    'workflow_sweep: "runs" counts ongoing runs by class and status');
SELECT set_eq(
    $$SELECT e ->> 'workflow_class' AS c, e ->> 'reason' AS r, (e ->> 'count')::int AS n FROM jsonb_array_elements(pg_temp.marked('sweep1') -> 'stuck') e$$,
    $$VALUES ('t_wfc_sw_stall', 'stalled', 1), ('t_wfc_sw_timeout', 'stalled', 1), ('t_wfc_sw_paused', 'paused_manual', 1),
             ('t_wfc_sw_lost', 'overdue', 1), ('t_wfc_sw_kept', 'overdue', 1), ('t_wfc_sw_old_paused', 'paused_manual', 1)$$,
    'workflow_sweep: "stuck" counts stuck runs by class and reason');
SELECT is(pgbus.workflow_sweep() -> 'stalled', '[]'::jsonb, 'workflow_sweep: a second sweep stalls nothing more');

-- The stall actions reattempt and cancel.
DO $d$ BEGIN PERFORM pg_temp.go('sw_re', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_re');
SELECT is(pgbus.workflow_sweep(stall_action => 'reattempt') -> 'stalled',
          jsonb_build_array(jsonb_build_object('workflow_id', pg_temp.run('sw_re'), 'workflow_class', 't_wfc_sw_re', 'step', 'a',
                                               'action', 'reattempt', 'was', 'running', 'status', 'ready',
                                               'error_class', 'pgbus.StepStalled')),
          'workflow_sweep: stall action reattempt');
SELECT is(pg_temp.attempts('sw_re'), 'a#1:stalled,a#2:scheduled', 'workflow_sweep: reattempt schedules the step again');
SELECT is((pg_temp.w('sw_re')).status, 'ready', 'workflow_sweep: reattempt: the run is ready');
DO $d$ BEGIN PERFORM pg_temp.go('sw_ca', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_ca');
SELECT is(pgbus.workflow_sweep(stall_action => 'cancel') -> 'stalled' -> 0 ->> 'action', 'cancel', 'workflow_sweep: stall action cancel');
SELECT results_eq($$SELECT status, ended_at IS NOT NULL FROM pgbus.workflows WHERE workflow_id = pg_temp.run('sw_ca')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'workflow_sweep: cancel: the run is cancelled');
SELECT is(pg_temp.attempts('sw_ca'), 'a#1:stalled', 'workflow_sweep: cancel: its attempt is stalled');
DO $d$ BEGIN PERFORM pg_temp.go('sw_bad', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_bad');
SELECT throws_ok($$SELECT pgbus.workflow_sweep(stall_action => 'explode')$$, '22023', NULL,
                 'workflow_sweep: an unknown stall action is refused');
-- The retention and resend_after arguments.
SELECT is(pgbus.workflow_sweep(retention => interval '5 days') -> 'deleted', '1'::jsonb,
          'workflow_sweep: a shorter retention deletes the run finished 10 days ago');

SELECT * FROM finish();
ROLLBACK;
