-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: pause; cancel; resume.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(63);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- pause
-------------------------------------------------------------------------------------------------
-- On a ready run: its scheduled attempt is superseded and its message deleted.
DO $d$ BEGIN PERFORM pg_temp.start('p_ready', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT pg_temp.mark('p_ready_a', to_jsonb(pg_temp.cur('p_ready')));
SELECT pg_temp.mark('p_ready_msg', to_jsonb((pg_temp.att(pg_temp.cur('p_ready'))).msg_id));
SELECT pg_temp.mark('p_ready_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('p_ready', 'pause', 'ops', 'maintenance'), '{"ok": true, "status": "paused"}'::jsonb,
          'pause on a ready run: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause, current_step_id FROM pgbus.workflows WHERE workflow_id = pg_temp.run('p_ready')$$,
                  $$VALUES ('paused'::text, 'manual'::text, (pg_temp.marked('p_ready_a'))::bigint)$$,
                  'pause on a ready run: the run is paused (manual)');
SELECT results_eq($$SELECT status, ended_at IS NOT NULL FROM pgbus.workflow_steps WHERE step_id = (pg_temp.marked('p_ready_a'))::bigint$$,
                  $$VALUES ('superseded'::text, true)$$, 'pause on a ready run: the scheduled attempt is superseded');
SELECT is(pg_temp.has_msg('t_wfc_p_ready', (pg_temp.marked('p_ready_msg'))::bigint), false,
          'pause on a ready run: its message is deleted from the queue');
SELECT is(pg_temp.has_msg('t_wfc_p_ready', (pg_temp.marked('p_ready_msg'))::bigint, 'a'), false,
          'pause on a ready run: ... not archived');
SELECT is(pg_temp.read('p_ready', 'p_ready'), 0, 'pause on a ready run: nothing is left to read');
SELECT is(pg_temp.events('p_ready', (pg_temp.marked('p_ready_ev'))::bigint), 'paused', 'pause on a ready run: a paused event');
SELECT results_eq($$SELECT step_id, actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('p_ready') AND event = 'paused'$$,
                  $$VALUES ((pg_temp.marked('p_ready_a'))::bigint, 'ops'::text, 'maintenance'::text)$$,
                  'pause: the paused event has the attempt, actor and reason');

-- On a running run: the attempt carries on.
DO $d$ BEGIN PERFORM pg_temp.go('p_running', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.cmd('p_running', 'pause', 'ops'), '{"ok": true, "status": "paused"}'::jsonb, 'pause on a running run: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('p_running')$$,
                  $$VALUES ('paused'::text, 'manual'::text)$$, 'pause on a running run: the run is paused (manual)');
SELECT is(pg_temp.attempts('p_running'), 'a#1:running', 'pause on a running run: the attempt keeps running');
SELECT is(pg_temp.has_amsg(pg_temp.cur('p_running')), true, 'pause on a running run: its message stays');

-- On a waiting run.
DO $d$ BEGIN PERFORM pg_temp.start('p_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('p_waiting');
SELECT is(pg_temp.cmd('p_waiting', 'pause'), '{"ok": true, "status": "paused"}'::jsonb, 'pause on a waiting run: answers ok, paused');

-------------------------------------------------------------------------------------------------
-- cancel
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('c_ready', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT pg_temp.mark('c_ready_msg', to_jsonb((pg_temp.att(pg_temp.cur('c_ready'))).msg_id));
SELECT pg_temp.mark('c_ready_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('c_ready', 'cancel', 'ops', 'wrong customer'), '{"ok": true, "status": "cancelled"}'::jsonb,
          'cancel on a ready run: answers ok, cancelled');
SELECT results_eq($$SELECT status, pause_cause, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('c_ready')$$,
                  $$VALUES ('cancelled'::text, NULL::text, true)$$, 'cancel on a ready run: the run is cancelled, ended now');
SELECT is(pg_temp.attempts('c_ready'), 'a#1:superseded', 'cancel on a ready run: the scheduled attempt is superseded');
SELECT is(pg_temp.has_msg('t_wfc_c_ready', (pg_temp.marked('c_ready_msg'))::bigint), false, 'cancel on a ready run: its message is deleted');
SELECT is(pg_temp.events('c_ready', (pg_temp.marked('c_ready_ev'))::bigint), 'cancelled', 'cancel: a cancelled event');
SELECT results_eq($$SELECT step_id, actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('c_ready') AND event = 'cancelled'$$,
                  $$VALUES (NULL::bigint, 'ops'::text, 'wrong customer'::text)$$, 'cancel: the cancelled event has actor and reason');

DO $d$ BEGIN PERFORM pg_temp.go('c_running', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.cmd('c_running', 'cancel'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel on a running run: answers ok, cancelled');
SELECT is(pg_temp.attempts('c_running'), 'a#1:running', 'cancel on a running run: the attempt is left to end (its end is refused)');

DO $d$ BEGIN PERFORM pg_temp.start('c_paused', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.cmd('c_paused', 'pause') ->> 'status', 'paused', 'setup: paused');
SELECT is(pg_temp.cmd('c_paused', 'cancel'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel on a paused run: answers ok, cancelled');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('c_paused')$$,
                  $$VALUES ('cancelled'::text, NULL::text)$$, 'cancel on a paused run: cancelled, no pause cause');

DO $d$ BEGIN PERFORM pg_temp.start('c_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('c_waiting');
SELECT is(pg_temp.cmd('c_waiting', 'cancel'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel on a waiting run: answers ok, cancelled');

-------------------------------------------------------------------------------------------------
-- resume
-------------------------------------------------------------------------------------------------
-- After a failed step: the same step again, attempt + 1.
DO $d$ BEGIN PERFORM pg_temp.go('r_failed', '[{"name": "a", "timeout": 45}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_failed'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused',
          'setup: step a failed and paused the run');
SELECT pg_temp.mark('r_failed_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('r_failed', 'resume', 'ops', 'fixed'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume after a failed step: answers ok, ready');
SELECT is(pg_temp.attempts('r_failed'), 'a#1:failed,a#2:scheduled', 'resume after a failed step: the same step again, attempt 2');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, w.current_step, pg_temp.recent(s.scheduled_at), s.timeout,
             (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('r_failed')$$,
    $$VALUES ('ready'::text, NULL::text, 'a'::text, true, interval '45 seconds', true)$$,
    'resume after a failed step: ready, attempt 2 current, scheduled now with its timeout, message visible');
SELECT is(pg_temp.events('r_failed', (pg_temp.marked('r_failed_ev'))::bigint), 'resumed,step_scheduled',
          'resume: events resumed, step_scheduled');
SELECT results_eq(
    $$SELECT event, actor, reason, details ->> 'step' FROM pgbus.workflow_events
      WHERE workflow_id = pg_temp.run('r_failed') AND event_id > (pg_temp.marked('r_failed_ev'))::bigint ORDER BY event_id$$,
    $$VALUES ('resumed'::text, 'ops'::text, 'fixed'::text, 'a'::text), ('step_scheduled', 'ops', NULL, 'a')$$,
    'resume: the events have the actor (and the reason on resumed)');
SELECT is(pg_temp.read('r_failed_again', 'r_failed'), 1, 'resume: the step is read again');
SELECT is((pg_temp.ctx('r_failed_again') ->> 'attempt')::int, 2, 'resume: ... as attempt 2');

-- After a step completed while the run was paused: the next step.
DO $d$ BEGIN PERFORM pg_temp.go('r_completed', '[{"name": "a"}, {"name": "b", "wait": 60}]'); END $d$;
SELECT is(pg_temp.cmd('r_completed', 'pause') ->> 'status', 'paused', 'setup: paused while a ran');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_completed'), 'complete') ->> 'status', 'paused', 'setup: a completed, the run stays paused');
SELECT is(pg_temp.cmd('r_completed', 'resume'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume after a completed step: answers ok, ready');
SELECT is(pg_temp.attempts('r_completed'), 'a#1:completed,b#1:scheduled', 'resume after a completed step: the next step is scheduled');
SELECT is(pg_temp.recent((pg_temp.att(pg_temp.cur('r_completed'))).scheduled_at, interval '60 seconds'), true,
          'resume after a completed step: ... after its wait');

DO $d$ BEGIN PERFORM pg_temp.go('r_skipped', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.cmd('r_skipped', 'pause') ->> 'status', 'paused', 'setup: paused while a ran');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_skipped'), 'skip') ->> 'status', 'paused', 'setup: a skipped, the run stays paused');
SELECT is(pg_temp.cmd('r_skipped', 'resume') ->> 'status', 'ready', 'resume after a skipped step: ready');
SELECT is(pg_temp.attempts('r_skipped'), 'a#1:skipped,b#1:scheduled', 'resume after a skipped step: the next step is scheduled');

DO $d$ BEGIN PERFORM pg_temp.go('r_last', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.cmd('r_last', 'pause') ->> 'status', 'paused', 'setup: paused while the last step ran');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_last'), 'complete') ->> 'status', 'paused', 'setup: the last step completed');
SELECT is(pg_temp.cmd('r_last', 'resume'), '{"ok": true, "status": "finished"}'::jsonb,
          'resume after the last step completed: the run finishes');
SELECT results_eq($$SELECT status, pause_cause, ended_at IS NOT NULL FROM pgbus.workflows WHERE workflow_id = pg_temp.run('r_last')$$,
                  $$VALUES ('finished'::text, NULL::text, true)$$, 'resume after the last step completed: finished, ended');

-- While the attempt is still running: the run is running again, nothing scheduled.
SELECT pg_temp.mark('p_running_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('p_running', 'resume', 'ops'), '{"ok": true, "status": "running"}'::jsonb,
          'resume while the attempt still runs: answers ok, running');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('p_running')$$,
                  $$VALUES ('running'::text, NULL::text)$$, 'resume while the attempt still runs: the run is running');
SELECT is(pg_temp.attempts('p_running'), 'a#1:running', 'resume while the attempt still runs: nothing is scheduled');
SELECT is(pg_temp.events('p_running', (pg_temp.marked('p_running_ev'))::bigint), 'resumed',
          'resume while the attempt still runs: only a resumed event');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('p_running'), 'complete') ->> 'status', 'ready',
          'resume while the attempt still runs: the step then ends normally');
SELECT is(pg_temp.attempts('p_running'), 'a#1:completed,b#1:scheduled', 'resume while the attempt still runs: ... and the run goes on');

-- After a pause on a ready run (its attempt superseded): the same step again.
SELECT is(pg_temp.cmd('p_ready', 'resume') ->> 'status', 'ready', 'resume after a pause on a ready run: ready');
SELECT is(pg_temp.attempts('p_ready'), 'a#1:superseded,a#2:scheduled', 'resume after a pause on a ready run: the step again, attempt 2');
SELECT is(pg_temp.has_amsg(pg_temp.cur('p_ready')), true, 'resume after a pause on a ready run: with a new message');

-- After a step paused the run (interrupted).
DO $d$ BEGIN PERFORM pg_temp.go('r_interrupted', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_interrupted'), 'pause') ->> 'status', 'paused', 'setup: the step paused the run');
SELECT is(pg_temp.cmd('r_interrupted', 'resume') ->> 'status', 'ready', 'resume after a step paused the run: ready');
SELECT is(pg_temp.attempts('r_interrupted'), 'a#1:interrupted,a#2:scheduled', 'resume after a step paused the run: the step again');

-- After a stall (its worker died; stall action pause).
DO $d$ BEGIN PERFORM pg_temp.go('r_stalled', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfc_r_stalled', (pg_temp.att(pg_temp.cur('r_stalled'))).msg_id, 0)$$, 'setup: the message comes back');
SELECT is(pg_temp.read('r_stalled_again', 'r_stalled'), 1, 'setup: read again: stalled');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('r_stalled')$$,
                  $$VALUES ('paused'::text, 'stall'::text)$$, 'setup: the run is paused by the stall');
SELECT is(pg_temp.cmd('r_stalled', 'resume') ->> 'status', 'ready', 'resume after a stall: ready');
SELECT is(pg_temp.attempts('r_stalled'), 'a#1:stalled,a#2:scheduled', 'resume after a stall: the step again');

SELECT * FROM finish();
ROLLBACK;
