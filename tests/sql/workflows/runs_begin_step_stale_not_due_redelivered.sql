-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: Stale messages are archived and not returned; An attempt not due yet (rescheduled later after its message was sent); A message read again while its attempt runs: the worker died; the stall action applies; A step missing from the definition; a gravestone; an outdated definition; workflow_end_step: complete, then the last step finishes the run; workflow_end_step: skip; workflow_end_step: reattempt; workflow_end_step: pause (without and with an error); workflow_end_step: cancel, finished; workflow_end_step: stale attempts (not current, or not running) change nothing.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(130);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- Stale messages are archived and not returned.
-------------------------------------------------------------------------------------------------
-- (1) A duplicate message of an attempt that already completed.
DO $d$ BEGIN PERFORM pg_temp.go('stale1', '[{"name": "a"}, {"name": "b", "wait": 3600}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('stale1_a', to_jsonb(pg_temp.cur('stale1'))); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('stale1'), 'complete') ->> 'ok', 'true', 'setup: step a completed');
DO $d$ BEGIN PERFORM pg_temp.mark('stale1_dup', to_jsonb((SELECT e FROM pgbus.enqueue('t_wfr_stale1', pgbus.step_job_class(),
    ARRAY[jsonb_build_object('kwargs', jsonb_build_object('workflow_id', pg_temp.run('stale1'),
                                                          'step_id', (pg_temp.marked('stale1_a'))::bigint))]) e))); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('stale1_state', pg_temp.state('stale1')); END $d$;
SELECT is(pg_temp.read('stale1_dup', 'stale1'), 0, 'workflow_begin_step: a duplicate message of a completed attempt is not returned');
SELECT is(pg_temp.has_msg('t_wfr_stale1', (pg_temp.marked('stale1_dup'))::bigint), false, 'workflow_begin_step: ... it left the queue');
SELECT is(pg_temp.has_msg('t_wfr_stale1', (pg_temp.marked('stale1_dup'))::bigint, 'a'), true, 'workflow_begin_step: ... it is archived');
SELECT is(pg_temp.state('stale1'), pg_temp.marked('stale1_state'), 'workflow_begin_step: ... and the run is untouched');

-- (2) The message of an attempt superseded while it ran (paused, then resumed at the step again).
DO $d$ BEGIN PERFORM pg_temp.go('stale2', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('stale2_a1', to_jsonb(pg_temp.cur('stale2'))); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('stale2'), 'pause') ->> 'status', 'paused', 'setup: the run paused while a ran');
SELECT is(pgbus.workflow_command(pg_temp.run('stale2'), 'resume_at', params => '{"step": "a"}') ->> 'status', 'ready',
          'setup: resumed at a: a second attempt');
DO $d$ BEGIN PERFORM pg_temp.mark('stale2_a2', to_jsonb(pg_temp.cur('stale2'))); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_stale2', (pg_temp.att((pg_temp.marked('stale2_a1'))::bigint)).msg_id, 0)$$,
                'setup: the first attempt''s message comes back');
SELECT is(pg_temp.read('stale2_again', 'stale2'), 1, 'workflow_begin_step: of the superseded and the current message one is returned');
SELECT is((pg_temp.ctx('stale2_again') ->> 'step_id')::bigint, (pg_temp.marked('stale2_a2'))::bigint,
          'workflow_begin_step: ... the current attempt''s');
SELECT is((pg_temp.ctx('stale2_again') ->> 'attempt')::int, 2, 'workflow_begin_step: ... attempt 2');
SELECT is(pg_temp.has_amsg((pg_temp.marked('stale2_a1'))::bigint), false, 'workflow_begin_step: the superseded message left the queue');
SELECT is(pg_temp.has_amsg((pg_temp.marked('stale2_a1'))::bigint, 'a'), true, 'workflow_begin_step: the superseded message is archived');
SELECT is(pg_temp.events('stale2') ~ 'stall', false, 'workflow_begin_step: a superseded message is no stall');

-- (3) A message of a running attempt whose run was cancelled.
DO $d$ BEGIN PERFORM pg_temp.go('stale3', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('stale3'), 'cancel') ->> 'status', 'cancelled', 'setup: the run cancelled while a ran');
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_stale3', (pg_temp.att(pg_temp.cur('stale3'))).msg_id, 0)$$, 'setup: its message comes back');
DO $d$ BEGIN PERFORM pg_temp.mark('stale3_state', pg_temp.state('stale3')); END $d$;
SELECT is(pg_temp.read('stale3_again', 'stale3'), 0, 'workflow_begin_step: the message of a cancelled run is not returned');
SELECT is(pg_temp.has_amsg(pg_temp.cur('stale3'), 'a'), true, 'workflow_begin_step: ... it is archived');
SELECT is(pg_temp.state('stale3') -> 'run', pg_temp.marked('stale3_state') -> 'run', 'workflow_begin_step: ... and the run is untouched (no stall)');
SELECT is((pg_temp.att(pg_temp.cur('stale3'))).status, 'superseded', 'workflow_begin_step: ... its running attempt ends with the run (superseded)');
SELECT is(pg_temp.events('stale3') ~ 'stall', false, 'workflow_begin_step: ... no stall event');

-- (4) A message whose run is gone.
DO $d$ BEGIN PERFORM pg_temp.mark('stale4', to_jsonb((SELECT e FROM pgbus.enqueue('t_wfr_stale4', pgbus.step_job_class(),
    ARRAY[jsonb_build_object('kwargs', jsonb_build_object('workflow_id', gen_random_uuid(), 'step_id', 987654321))]) e))); END $d$;
SELECT is(pg_temp.read('stale4', 'stale4'), 0, 'workflow_begin_step: a message whose run is gone is not returned');
SELECT is(pg_temp.has_msg('t_wfr_stale4', (pg_temp.marked('stale4'))::bigint, 'a'), true, 'workflow_begin_step: ... it is archived');

-------------------------------------------------------------------------------------------------
-- An attempt not due yet (rescheduled later after its message was sent).
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('notdue', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() + interval '1 hour' WHERE step_id = pg_temp.cur('notdue');
SELECT is(pg_temp.read('notdue', 'notdue'), 0, 'workflow_begin_step: an attempt not due yet is not returned');
SELECT is((pg_temp.amsg(pg_temp.cur('notdue'))).vt, now() + interval '1 hour',
          'workflow_begin_step: its message is hidden until the attempt''s scheduled_at');
SELECT results_eq($$SELECT status, started_at FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('notdue')$$,
                  $$VALUES ('scheduled'::text, NULL::timestamptz)$$, 'workflow_begin_step: the attempt stays scheduled');
SELECT is((pg_temp.w('notdue')).status, 'ready', 'workflow_begin_step: the run stays ready');
SELECT is(pg_temp.events('notdue'), 'started,step_scheduled', 'workflow_begin_step: no step_started event');

-------------------------------------------------------------------------------------------------
-- A message read again while its attempt runs: the worker died; the stall action applies.
-------------------------------------------------------------------------------------------------
-- stall action 'pause' (the default)
DO $d$ BEGIN PERFORM pg_temp.go('stall_p', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('stall_p_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_stall_p', (pg_temp.att(pg_temp.cur('stall_p'))).msg_id, 0)$$, 'setup: the message comes back');
SELECT is(pg_temp.read('stall_p_again', 'stall_p'), 1, 'workflow_begin_step: a redelivered running attempt returns a row');
SELECT is(pg_temp.ctx('stall_p_again'),
          jsonb_build_object('stalled', true, 'detection', 'redelivery', 'action', 'pause', 'status', 'paused',
                             'was', 'running', 'workflow_id', pg_temp.run('stall_p'), 'workflow_class', 't_wfr_stall_p',
                             'step_name', 'a', 'attempt', 1),
          'workflow_begin_step: the context is {"stalled": true, "detection": "redelivery", "action": "pause", "status": "paused", ...}');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('stall_p')$$,
                  $$VALUES ('paused'::text, 'stall'::text)$$, 'workflow_begin_step: stall action pause: the run is paused (stall)');
SELECT results_eq(
    $$SELECT status, outcome, error_class, error ->> 'class', error ->> 'worker', ended_at IS NOT NULL
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('stall_p')$$,
    $$VALUES ('stalled'::text, 'pause'::text, 'pgbus.StepStalled'::text, 'pgbus.StepStalled'::text, 'host:1'::text, true)$$,
    'workflow_begin_step: the attempt is stalled, with the StepStalled error naming the worker');
SELECT is(pg_temp.has_amsg(pg_temp.cur('stall_p')), false, 'workflow_begin_step: the redelivered message left the queue');
SELECT is(pg_temp.has_amsg(pg_temp.cur('stall_p'), 'a'), true, 'workflow_begin_step: ... archived');
SELECT is(pg_temp.attempts('stall_p'), 'a#1:stalled', 'workflow_begin_step: stall action pause schedules nothing');
SELECT is(pg_temp.events('stall_p', (pg_temp.marked('stall_p_ev'))::bigint), 'stall_detected,paused',
          'workflow_begin_step: events stall_detected, paused');
SELECT results_eq(
    $$SELECT event, actor, reason, details FROM pgbus.workflow_events
      WHERE workflow_id = pg_temp.run('stall_p') AND event IN ('stall_detected', 'paused') ORDER BY event_id$$,
    $$VALUES ('stall_detected'::text, 'pgbus'::text, NULL::text, '{"detection": "redelivery", "action": "pause", "step": "a"}'::jsonb),
             ('paused', 'pgbus', 'stalled', '{}')$$,
    'workflow_begin_step: stall_detected and paused events by pgbus');

-- stall action 'reattempt'
DO $d$ BEGIN PERFORM pg_temp.go('stall_r', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('stall_r_a1', to_jsonb(pg_temp.cur('stall_r'))); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_stall_r', (pg_temp.att(pg_temp.cur('stall_r'))).msg_id, 0)$$, 'setup: the message comes back');
SELECT is(pg_temp.read('stall_r_again', 'stall_r', 'reattempt'), 1, 'workflow_begin_step: a redelivered running attempt returns a row');
SELECT is(pg_temp.ctx('stall_r_again') - 'workflow_id',
          '{"stalled": true, "detection": "redelivery", "action": "reattempt", "status": "ready", "was": "running",
            "workflow_class": "t_wfr_stall_r", "step_name": "a", "attempt": 1}'::jsonb,
          'workflow_begin_step: stall action reattempt answers status ready');
SELECT is(pg_temp.attempts('stall_r'), 'a#1:stalled,a#2:scheduled', 'workflow_begin_step: stall action reattempt schedules attempt 2');
SELECT results_eq(
    $$SELECT w.status, w.current_step, s.attempt, pg_temp.recent(s.scheduled_at), s.msg_id IS NOT NULL AND s.msg_id <> (pg_temp.att((pg_temp.marked('stall_r_a1'))::bigint)).msg_id,
             pg_temp.has_amsg(s.step_id)
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('stall_r')$$,
    $$VALUES ('ready'::text, 'a'::text, 2, true, true, true)$$,
    'workflow_begin_step: the run is ready with attempt 2 current, scheduled now, with a new message');
SELECT is((pg_temp.att((pg_temp.marked('stall_r_a1'))::bigint)).outcome, 'reattempt', 'workflow_begin_step: the stalled attempt''s outcome is reattempt');

-- stall action 'cancel'
DO $d$ BEGIN PERFORM pg_temp.go('stall_c', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_stall_c', (pg_temp.att(pg_temp.cur('stall_c'))).msg_id, 0)$$, 'setup: the message comes back');
SELECT is(pg_temp.read('stall_c_again', 'stall_c', 'cancel'), 1, 'workflow_begin_step: a redelivered running attempt returns a row');
SELECT is(pg_temp.ctx('stall_c_again') ->> 'status', 'cancelled', 'workflow_begin_step: stall action cancel answers status cancelled');
SELECT results_eq($$SELECT status, ended_at IS NOT NULL FROM pgbus.workflows WHERE workflow_id = pg_temp.run('stall_c')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'workflow_begin_step: stall action cancel cancels the run');
SELECT is(pg_temp.attempts('stall_c'), 'a#1:stalled', 'workflow_begin_step: the attempt is stalled, nothing scheduled');
SELECT results_eq($$SELECT actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('stall_c') AND event = 'cancelled'$$,
                  $$VALUES ('pgbus'::text, 'stalled'::text)$$, 'workflow_begin_step: a cancelled event by pgbus, reason stalled');

-- an unknown stall action
DO $d$ BEGIN PERFORM pg_temp.go('stall_x', '[{"name": "a"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_stall_x', (pg_temp.att(pg_temp.cur('stall_x'))).msg_id, 0)$$, 'setup: the message comes back');
SELECT throws_ok(format($$SELECT pgbus.workflow_begin_step('t_wfr_stall_x', %s, %L, 'host:2', 'rev', 'explode')$$,
                        (pg_temp.att(pg_temp.cur('stall_x'))).msg_id, (pg_temp.amsg(pg_temp.cur('stall_x'))).message),
                 '22023', NULL, 'workflow_begin_step: an unknown stall action is refused (22023)');
INSERT INTO t_runs SELECT 'stall_x2', s.* FROM pgbus.workflow_start('t_wfr_stall_x') s;
SELECT is(pg_temp.read('stall_x_again', 'stall_x', 'explode'), 2,
          'read_jobs: a step that cannot begin does not stop the others (two rows)');
SELECT results_eq($$SELECT context ->> 'sqlstate', context ? 'begin_error' FROM t_reads
                    WHERE tag = 'stall_x_again' AND (message -> 'kwargs' ->> 'workflow_id')::uuid = pg_temp.run('stall_x')$$,
                  $$VALUES ('22023'::text, true)$$, 'read_jobs: the step that cannot begin carries {"begin_error", "sqlstate"}');
SELECT is((pg_temp.att(pg_temp.cur('stall_x'))).status, 'running', 'read_jobs: ... and its begin is undone (attempt still running)');
SELECT is((SELECT context ->> 'step_name' FROM t_reads
           WHERE tag = 'stall_x_again' AND (message -> 'kwargs' ->> 'workflow_id')::uuid = pg_temp.run('stall_x2')), 'a',
          'read_jobs: the other step begins');

-------------------------------------------------------------------------------------------------
-- A step missing from the definition; a gravestone; an outdated definition.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('missing', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pgbus.workflow_register('t_wfr_missing', '[{"name": "b"}]', 'd2', 't_wfr_missing'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('missing_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.read('missing', 'missing'), 1, 'workflow_begin_step: a step missing from the definition is returned ...');
SELECT is(pg_temp.ctx('missing') - 'workflow_id',
          '{"concluded": true, "was": "ready", "status": "paused", "workflow_class": "t_wfr_missing", "step_name": "a",
            "attempt": 1, "error": {"class": "pgbus.workflow.StepNotDefined", "message": "t_wfr_missing has no step a"}}'::jsonb,
          'workflow_begin_step: ... as concluded, not to run: the run paused with StepNotDefined (the worker emits and reports)');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('missing')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'workflow_begin_step: a missing step pauses the run (error)');
SELECT results_eq(
    $$SELECT status, outcome, error_class, error ->> 'message', ended_at IS NOT NULL
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('missing')$$,
    $$VALUES ('failed'::text, 'pause'::text, 'pgbus.workflow.StepNotDefined'::text, 't_wfr_missing has no step a'::text, true)$$,
    'workflow_begin_step: the attempt failed with pgbus.workflow.StepNotDefined');
SELECT is(pg_temp.attempts('missing'), 'a#1:failed', 'workflow_begin_step: a missing step schedules nothing');
SELECT is(pg_temp.has_amsg(pg_temp.cur('missing'), 'a'), true, 'workflow_begin_step: its message is archived');
SELECT is(pg_temp.events('missing', (pg_temp.marked('missing_ev'))::bigint), 'step_started,step_failed,paused',
          'workflow_begin_step: events step_started, step_failed, paused');

DO $d$ BEGIN PERFORM pg_temp.start('grave', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pgbus.workflow_register('t_wfr_grave', '[{"name": "a", "removed": true}, {"name": "b"}]', 'd2', 't_wfr_grave'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('grave_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.read('grave', 'grave'), 1, 'workflow_begin_step: a gravestone step is returned ...');
SELECT is(pg_temp.ctx('grave') - 'workflow_id',
          '{"concluded": true, "was": "ready", "status": "ready", "workflow_class": "t_wfr_grave", "step_name": "a",
            "attempt": 1, "error": null}'::jsonb,
          'workflow_begin_step: ... as concluded, not to run: skipped, the run ready for its next step');
SELECT is(pg_temp.attempts('grave'), 'a#1:skipped,b#1:scheduled', 'workflow_begin_step: a gravestone is skipped and the next step scheduled');
SELECT results_eq($$SELECT status, current_step FROM pgbus.workflows WHERE workflow_id = pg_temp.run('grave')$$,
                  $$VALUES ('ready'::text, 'b'::text)$$, 'workflow_begin_step: the run is ready at the next step');
SELECT is(pg_temp.has_amsg(pg_temp.cur('grave')), true, 'workflow_begin_step: the next step''s message is sent');
SELECT is(pg_temp.events('grave', (pg_temp.marked('grave_ev'))::bigint), 'step_started,step_skipped,step_scheduled',
          'workflow_begin_step: events step_started, step_skipped, step_scheduled');

DO $d$ BEGIN PERFORM pg_temp.start('outdated', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pgbus.workflow_register('t_wfr_outdated', '[{"name": "a"}, {"name": "b"}]', 'd2', 't_wfr_outdated'); END $d$;
SELECT is(pg_temp.read('outdated', 'outdated'), 1, 'workflow_begin_step: a run of an older definition is read');
SELECT is(pg_temp.ctx('outdated') -> 'definition_outdated', 'true'::jsonb,
          'workflow_begin_step: definition_outdated is true when the run''s digest is not the registered one');
SELECT is((pg_temp.w('outdated')).definition_digest, 'd1', 'workflow_begin_step: the run keeps the digest it started with');

-------------------------------------------------------------------------------------------------
-- workflow_end_step: complete, then the last step finishes the run.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('complete', '[{"name": "a"}, {"name": "b", "wait": 600}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('complete_a', to_jsonb(pg_temp.cur('complete'))); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('complete_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('complete'), 'complete', '{"out": 1}', reason => 'done a'),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfr_complete", "step": "a"}'::jsonb,
          'workflow_end_step complete: answers ok, ready, with class and step');
SELECT results_eq(
    $$SELECT status, outcome, output, error, ended_at IS NOT NULL FROM pgbus.workflow_steps
      WHERE step_id = (pg_temp.marked('complete_a'))::bigint$$,
    $$VALUES ('completed'::text, 'complete'::text, '{"out": 1}'::jsonb, NULL::jsonb, true)$$,
    'workflow_end_step complete: the attempt is completed with its output');
SELECT is(pg_temp.has_amsg((pg_temp.marked('complete_a'))::bigint), false, 'workflow_end_step complete: the step''s message left the queue');
SELECT is(pg_temp.has_amsg((pg_temp.marked('complete_a'))::bigint, 'a'), true, 'workflow_end_step complete: ... archived');
SELECT is(pg_temp.attempts('complete'), 'a#1:completed,b#1:scheduled', 'workflow_end_step complete: the next step is scheduled');
SELECT results_eq(
    $$SELECT w.status, w.current_step, pg_temp.recent(s.scheduled_at, interval '600 seconds'), (pg_temp.amsg(s.step_id)).vt = s.scheduled_at,
             s.msg_id <> (pg_temp.att((pg_temp.marked('complete_a'))::bigint)).msg_id
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('complete')$$,
    $$VALUES ('ready'::text, 'b'::text, true, true, true)$$,
    'workflow_end_step complete: the run is ready at b, scheduled after its wait, with a new message hidden until then');
SELECT is(pg_temp.events('complete', (pg_temp.marked('complete_ev'))::bigint), 'step_completed,step_scheduled',
          'workflow_end_step complete: events step_completed, step_scheduled');
SELECT results_eq(
    $$SELECT step_id, actor, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('complete') AND event = 'step_completed'$$,
    $$VALUES ((pg_temp.marked('complete_a'))::bigint, NULL::text, 'done a'::text, '{"step": "a", "attempt": 1, "verb": "complete"}'::jsonb)$$,
    'workflow_end_step complete: step_completed has the attempt, the reason and step/attempt/verb');
-- The last step.
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '1 second' WHERE step_id = pg_temp.cur('complete');
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfr_complete', (pg_temp.att(pg_temp.cur('complete'))).msg_id, 0)$$, 'setup: step b is due');
SELECT is(pg_temp.read('complete_b', 'complete'), 1, 'setup: step b read');
DO $d$ BEGIN PERFORM pg_temp.mark('complete_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('complete'), 'complete', '{"out": 2}'),
          '{"ok": true, "status": "finished", "workflow_class": "t_wfr_complete", "step": "b"}'::jsonb,
          'workflow_end_step complete: the last step answers finished');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at), pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('complete')$$,
                  $$VALUES ('finished'::text, true, NULL::text)$$, 'workflow_end_step complete: the run is finished, ended now');
SELECT is(pg_temp.attempts('complete'), 'a#1:completed,b#1:completed', 'workflow_end_step complete: nothing more is scheduled');
SELECT is(pg_temp.events('complete', (pg_temp.marked('complete_ev'))::bigint), 'step_completed,finished',
          'workflow_end_step complete: events step_completed, finished');
SELECT is((SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('complete') AND event = 'finished' AND step_id IS NULL),
          1::bigint, 'workflow_end_step complete: one finished event for the run');

-------------------------------------------------------------------------------------------------
-- workflow_end_step: skip
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('skip', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('skip_a', to_jsonb(pg_temp.cur('skip'))); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('skip_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('skip'), 'skip', '{"ignored": true}', reason => '   '),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfr_skip", "step": "a"}'::jsonb,
          'workflow_end_step skip: answers ok, ready');
SELECT results_eq($$SELECT status, outcome, output FROM pgbus.workflow_steps WHERE step_id = (pg_temp.marked('skip_a'))::bigint$$,
                  $$VALUES ('skipped'::text, 'skip'::text, NULL::jsonb)$$, 'workflow_end_step skip: the attempt is skipped (no output kept)');
SELECT is(pg_temp.attempts('skip'), 'a#1:skipped,b#1:scheduled', 'workflow_end_step skip: the next step is scheduled');
SELECT is(pg_temp.recent((pg_temp.att(pg_temp.cur('skip'))).scheduled_at), true, 'workflow_end_step skip: ... now (no wait)');
SELECT is(pg_temp.events('skip', (pg_temp.marked('skip_ev'))::bigint), 'step_skipped,step_scheduled',
          'workflow_end_step skip: events step_skipped, step_scheduled');
SELECT is((pg_temp.ev('skip', 'step_skipped')).reason, NULL, 'workflow_end_step: a blank reason is recorded as NULL');

-------------------------------------------------------------------------------------------------
-- workflow_end_step: reattempt
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('reattempt', '[{"name": "a", "timeout": 30}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('reattempt_a1', to_jsonb(pg_temp.cur('reattempt'))); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('reattempt_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('reattempt'), 'reattempt', wait => interval '5 minutes', reason => 'busy'),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfr_reattempt", "step": "a"}'::jsonb,
          'workflow_end_step reattempt: answers ok, ready');
SELECT results_eq($$SELECT status, outcome FROM pgbus.workflow_steps WHERE step_id = (pg_temp.marked('reattempt_a1'))::bigint$$,
                  $$VALUES ('interrupted'::text, 'reattempt'::text)$$, 'workflow_end_step reattempt: the attempt is interrupted');
SELECT is(pg_temp.attempts('reattempt'), 'a#1:interrupted,a#2:scheduled', 'workflow_end_step reattempt: attempt 2 of the step is scheduled');
SELECT results_eq(
    $$SELECT w.status, w.current_step, s.attempt, pg_temp.recent(s.scheduled_at, interval '5 minutes'),
             (pg_temp.amsg(s.step_id)).vt = s.scheduled_at, s.timeout
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('reattempt')$$,
    $$VALUES ('ready'::text, 'a'::text, 2, true, true, interval '30 seconds')$$,
    'workflow_end_step reattempt: attempt 2 is current, scheduled and visible at now + wait, with the step''s timeout');
SELECT is(pg_temp.events('reattempt', (pg_temp.marked('reattempt_ev'))::bigint), 'step_interrupted,step_scheduled',
          'workflow_end_step reattempt: events step_interrupted, step_scheduled');
DO $d$ BEGIN PERFORM pg_temp.go('reattempt0', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('reattempt0'), 'reattempt') ->> 'status', 'ready', 'workflow_end_step reattempt: without a wait');
SELECT results_eq($$SELECT attempt, pg_temp.recent(scheduled_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('reattempt0')$$,
                  $$VALUES (2, true)$$, 'workflow_end_step reattempt: without a wait attempt 2 is scheduled now');

-------------------------------------------------------------------------------------------------
-- workflow_end_step: pause (without and with an error)
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('pause', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('pause_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('pause'), 'pause', reason => 'hold on'),
          '{"ok": true, "status": "paused", "workflow_class": "t_wfr_pause", "step": "a"}'::jsonb,
          'workflow_end_step pause: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('pause')$$,
                  $$VALUES ('paused'::text, 'manual'::text)$$, 'workflow_end_step pause: the run is paused (manual)');
SELECT results_eq($$SELECT status, outcome, error FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('pause')$$,
                  $$VALUES ('interrupted'::text, 'pause'::text, NULL::jsonb)$$, 'workflow_end_step pause: the attempt is interrupted');
SELECT is(pg_temp.attempts('pause'), 'a#1:interrupted', 'workflow_end_step pause: nothing is scheduled');
SELECT is(pg_temp.has_amsg(pg_temp.cur('pause'), 'a'), true, 'workflow_end_step pause: the step''s message is archived');
SELECT is(pg_temp.events('pause', (pg_temp.marked('pause_ev'))::bigint), 'step_interrupted,paused',
          'workflow_end_step pause: events step_interrupted, paused');
SELECT results_eq($$SELECT step_id, actor, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('pause') AND event = 'paused'$$,
                  $$VALUES (pg_temp.cur('pause'), 'step'::text, 'hold on'::text, '{}'::jsonb)$$,
                  'workflow_end_step pause: the paused event is by the step, with the reason');

DO $d$ BEGIN PERFORM pg_temp.go('fail', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('fail_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('fail'), 'pause', NULL, '{"class": "app.Boom", "message": "boom"}', reason => 'it broke'),
          '{"ok": true, "status": "paused", "workflow_class": "t_wfr_fail", "step": "a"}'::jsonb,
          'workflow_end_step pause with an error: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fail')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'workflow_end_step pause with an error: the run is paused (error)');
SELECT results_eq($$SELECT status, outcome, error, error_class, output FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('fail')$$,
                  $$VALUES ('failed'::text, 'pause'::text, '{"class": "app.Boom", "message": "boom"}'::jsonb, 'app.Boom'::text, NULL::jsonb)$$,
                  'workflow_end_step pause with an error: the attempt failed with the error and its class');
SELECT is(pg_temp.events('fail', (pg_temp.marked('fail_ev'))::bigint), 'step_failed,paused',
          'workflow_end_step pause with an error: events step_failed, paused');
SELECT results_eq(
    $$SELECT event, actor, reason, details FROM pgbus.workflow_events
      WHERE workflow_id = pg_temp.run('fail') AND event IN ('step_failed', 'paused') ORDER BY event_id$$,
    $$VALUES ('step_failed'::text, NULL::text, 'it broke'::text, '{"step": "a", "attempt": 1, "verb": "pause", "error_class": "app.Boom"}'::jsonb),
             ('paused', 'step', 'it broke', '{"error_class": "app.Boom"}')$$,
    'workflow_end_step pause with an error: the events carry the error class');

-------------------------------------------------------------------------------------------------
-- workflow_end_step: cancel, finished
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('cancel', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('cancel_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('cancel'), 'cancel', reason => 'not needed'),
          '{"ok": true, "status": "cancelled", "workflow_class": "t_wfr_cancel", "step": "a"}'::jsonb,
          'workflow_end_step cancel: answers ok, cancelled');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at), pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('cancel')$$,
                  $$VALUES ('cancelled'::text, true, NULL::text)$$, 'workflow_end_step cancel: the run is cancelled, ended now');
SELECT is(pg_temp.attempts('cancel'), 'a#1:cancelled', 'workflow_end_step cancel: the attempt is cancelled, nothing scheduled');
SELECT is(pg_temp.events('cancel', (pg_temp.marked('cancel_ev'))::bigint), 'step_cancelled,cancelled',
          'workflow_end_step cancel: events step_cancelled, cancelled');
SELECT results_eq($$SELECT actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('cancel') AND event = 'cancelled'$$,
                  $$VALUES ('step'::text, 'not needed'::text)$$, 'workflow_end_step cancel: the cancelled event is by the step, with the reason');

DO $d$ BEGIN PERFORM pg_temp.go('finished', '[{"name": "a"}, {"name": "b"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.mark('finished_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('finished'), 'finished', '{"r": 1}'),
          '{"ok": true, "status": "finished", "workflow_class": "t_wfr_finished", "step": "a"}'::jsonb,
          'workflow_end_step finished: answers ok, finished');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('finished')$$,
                  $$VALUES ('finished'::text, true)$$, 'workflow_end_step finished: the run is finished before its last step');
SELECT results_eq($$SELECT status, outcome, output FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('finished')$$,
                  $$VALUES ('completed'::text, 'finished'::text, '{"r": 1}'::jsonb)$$,
                  'workflow_end_step finished: the attempt is completed with its output');
SELECT is(pg_temp.attempts('finished'), 'a#1:completed', 'workflow_end_step finished: step b is never scheduled');
SELECT is(pg_temp.events('finished', (pg_temp.marked('finished_ev'))::bigint), 'step_completed,finished',
          'workflow_end_step finished: events step_completed, finished');

-------------------------------------------------------------------------------------------------
-- workflow_end_step: stale attempts (not current, or not running) change nothing.
-------------------------------------------------------------------------------------------------
-- An attempt that already ended (skip's step a, b is current).
DO $d$ BEGIN PERFORM pg_temp.mark('skip_state', pg_temp.state('skip')); END $d$;
SELECT is(pg_temp.end_step((pg_temp.marked('skip_a'))::bigint, 'complete', '{"late": true}'),
          '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'workflow_end_step: an attempt that already ended is stale');
SELECT is(pg_temp.state('skip'), pg_temp.marked('skip_state'), 'workflow_end_step: ... and changes nothing');
-- An attempt that is scheduled, not running (skip's step b).
SELECT is(pg_temp.end_step(pg_temp.cur('skip'), 'complete'), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'workflow_end_step: an attempt that is not running is stale');
SELECT is(pg_temp.state('skip'), pg_temp.marked('skip_state'), 'workflow_end_step: ... and changes nothing (run, attempts, events)');
-- A stalled attempt (stall_p: the run paused by the stall).
DO $d$ BEGIN PERFORM pg_temp.mark('stall_p_state', pg_temp.state('stall_p')); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('stall_p'), 'complete'), '{"ok": false, "code": "stale", "status": "paused"}'::jsonb,
          'workflow_end_step: a stalled attempt is stale');
SELECT is(pg_temp.state('stall_p'), pg_temp.marked('stall_p_state'), 'workflow_end_step: ... and changes nothing');
-- A running attempt that is no longer current (stale2's first attempt).
DO $d$ BEGIN PERFORM pg_temp.mark('stale2_state', pg_temp.state('stale2')); END $d$;
SELECT is(pg_temp.end_step((pg_temp.marked('stale2_a1'))::bigint, 'complete'),
          '{"ok": false, "code": "stale", "status": "running"}'::jsonb,
          'workflow_end_step: a running attempt that is not current is stale');
SELECT is(pg_temp.state('stale2'), pg_temp.marked('stale2_state'), 'workflow_end_step: ... and changes nothing');

SELECT * FROM finish();
ROLLBACK;
