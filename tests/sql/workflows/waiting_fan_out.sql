-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Fan-out: park on one batch (workflow_end_step 'park' with fan_out).
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(39);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- Fan-out: park on one batch (workflow_end_step 'park' with fan_out)
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('fo', pg_temp.fan()); END $d$;
SELECT pg_temp.mark('fo_a', to_jsonb(pg_temp.cur('fo')));
SELECT pg_temp.mark('fo_msg', to_jsonb((pg_temp.att(pg_temp.cur('fo'))).msg_id));
SELECT pg_temp.mark_ev('fo_ev');
SELECT is(pg_temp.end_step(pg_temp.cur('fo'), 'park', fan_out =>
              '[{"queue": "t_wfw_fo_m", "job_class": "app:Notify", "arguments": {"args": [1]}, "run_at": null},
                {"queue": "t_wfw_fo_m", "job_class": "app:Audit", "arguments": {"args": [2], "kwargs": {"k": "v"}}, "run_at": null},
                {"queue": "t_wfw_fo_m", "job_class": "app:Notify", "arguments": {"args": [3]}, "run_at": null}]'),
          '{"ok": true, "status": "waiting", "workflow_class": "t_wfw_fo", "step": "notify"}'::jsonb,
          'fan-out park: answers ok, waiting');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fo')::text), 1::bigint,
          'fan-out park: exactly one batch for the run');
SELECT pg_temp.mark('fo_b', to_jsonb((pg_temp.batch('fo')).batch_id));
SELECT results_eq(
    $$SELECT description, properties, on_complete, on_success, on_discard, total_jobs, completed_jobs, discarded_jobs, status
      FROM pgbus.batches WHERE batch_id = (pg_temp.marked('fo_b') #>> '{}')::uuid$$,
    $$VALUES ('t_wfw_fo#notify ' || pg_temp.run('fo'),
              jsonb_build_object('workflow_id', pg_temp.run('fo'), 'step_id', pg_temp.id('fo_a')),
              '{"job_class": "pgbus.workflow:BatchFinishedJob", "queue": "t_wfw_fo"}'::jsonb, NULL::jsonb, NULL::jsonb,
              3, 0, 0, 'processing'::text)$$,
    'fan-out park: the batch is described "Class#step workflow_id", names run and attempt, calls back BatchFinishedJob on the step''s queue, holds 3 jobs, closed');
SELECT results_eq(
    $$SELECT m ->> 'job_class', m -> 'args', m -> 'kwargs', m ->> 'batch_id', m ->> 'queue' FROM pg_temp.queue_messages('t_wfw_fo_m') m$$,
    $$VALUES ('app:Notify'::text, '[1]'::jsonb, '{}'::jsonb, pg_temp.marked('fo_b') #>> '{}', 't_wfw_fo_m'::text),
             ('app:Notify', '[3]', '{}', pg_temp.marked('fo_b') #>> '{}', 't_wfw_fo_m'),
             ('app:Audit', '[2]', '{"k": "v"}', pg_temp.marked('fo_b') #>> '{}', 't_wfw_fo_m')$$,
    'fan-out park: the members are enqueued with the batch_id and their arguments');
SELECT results_eq(
    $$SELECT status, outcome, batch_id::text, wait_for, pg_temp.recent(waiting_since), wait_deadline, wait_remaining
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fo_a')$$,
    $$VALUES ('waiting'::text, 'park'::text, pg_temp.marked('fo_b') #>> '{}', NULL::text, true, NULL::timestamptz, NULL::interval)$$,
    'fan-out park: the attempt waits on the batch (no gate, no deadline without wait_timeout)');
SELECT is((pg_temp.w('fo')).status, 'waiting', 'fan-out park: the run is waiting');
SELECT is(pg_temp.has_msg('t_wfw_fo', pg_temp.id('fo_msg'), 'a'), true, 'fan-out park: the step''s message is archived');
SELECT results_eq($$SELECT event, step_id, actor, details FROM pg_temp.evs('fo', 'fo_ev')$$,
                  $$VALUES ('fan_out_opened'::text, pg_temp.id('fo_a'), NULL::text,
                            jsonb_build_object('step', 'notify', 'batch_id', pg_temp.marked('fo_b') #>> '{}', 'jobs', 3)),
                           ('step_waiting', pg_temp.id('fo_a'), NULL,
                            jsonb_build_object('step', 'notify', 'verb', 'park', 'batch_id', pg_temp.marked('fo_b') #>> '{}'))$$,
                  'fan-out park: events fan_out_opened (3 jobs) and step_waiting (on the batch)');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('fo')), '{skip,signal,pause,cancel}'::text[],
          'workflow_available_actions of a run waiting on a batch: skip, signal, pause, cancel');
SELECT is(pg_temp.signal('fo', 'paid') ->> 'woke', 'false', 'a signal does not wake a step waiting on a batch');
-- workflow_fan_out_finished while members are left: running, nothing changes.
SELECT is(pgbus.batch_member_done((pg_temp.marked('fo_b') #>> '{}')::uuid, 'completed'), false, 'setup: one member completed');
SELECT pg_temp.mark('fo_state', pg_temp.state('fo'));
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fo_a')), '{"ok": false, "code": "running", "status": "waiting"}'::jsonb,
          'workflow_fan_out_finished with members left: running');
SELECT is(pg_temp.state('fo'), pg_temp.marked('fo_state'), '... nothing changed');
SELECT is(pgbus.workflow_fan_out_finished(-1), '{"ok": false, "code": "not_found"}'::jsonb, 'workflow_fan_out_finished of an unknown attempt: not_found');
-- Every member completed: the callback is enqueued; the step completes, the next is scheduled.
SELECT is(pgbus.batch_member_done((pg_temp.marked('fo_b') #>> '{}')::uuid, 'completed', 2), true, 'setup: the last two members completed');
SELECT results_eq($$SELECT m ->> 'job_class', m -> 'args' FROM pg_temp.queue_messages('t_wfw_fo') m$$,
                  $$VALUES ('pgbus.workflow:BatchFinishedJob'::text,
                            jsonb_build_array(jsonb_build_object('workflow_id', pg_temp.run('fo'), 'step_id', pg_temp.id('fo_a'))))$$,
                  'the finished batch sends BatchFinishedJob to the step''s queue with the batch''s properties');
SELECT pg_temp.mark_ev('fo_ev2');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fo_a')),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfw_fo", "step": "notify"}'::jsonb,
          'workflow_fan_out_finished after every member completed: ok, ready');
SELECT results_eq($$SELECT status, outcome, error_class, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fo_a')$$,
                  $$VALUES ('completed'::text, 'resolve'::text, NULL::text, true)$$, '... the step completed (resolve)');
SELECT is(pg_temp.attempts('fo'), 'notify#1:completed,ship#1:scheduled', '... the next step is scheduled');
SELECT is((pg_temp.w('fo')).status, 'ready', '... the run is ready');
SELECT results_eq($$SELECT event, actor, reason, details FROM pg_temp.evs('fo', 'fo_ev2')$$,
                  $$VALUES ('fan_out_finished'::text, 'pgbus'::text, NULL::text,
                            jsonb_build_object('step', 'notify', 'batch_id', pg_temp.marked('fo_b') #>> '{}', 'jobs', 3, 'dead_lettered', 0)),
                           ('step_completed', 'pgbus', NULL, '{"step": "notify", "attempt": 1, "verb": "resolve"}'),
                           ('step_scheduled', 'pgbus', NULL,
                            jsonb_build_object('step', 'ship', 'attempt', 1, 'scheduled_at', (pg_temp.att(pg_temp.cur('fo'))).scheduled_at))$$,
                  '... events fan_out_finished, step_completed, step_scheduled by the caller (pgbus)');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fo_a')), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'workflow_fan_out_finished a second time: stale');

-- An empty fan-out resolves at once.
DO $d$ BEGIN PERFORM pg_temp.go('fo_empty', pg_temp.fan()); END $d$;
SELECT pg_temp.mark('fo_empty_a', to_jsonb(pg_temp.cur('fo_empty')));
SELECT pg_temp.mark_ev('fo_empty_ev');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_empty'), 'park', fan_out => '[]'),
          '{"ok": true, "status": "ready", "workflow_class": "t_wfw_fo_empty", "step": "notify"}'::jsonb,
          'an empty fan-out: answers ready at once');
SELECT results_eq($$SELECT s.status, s.outcome, b.total_jobs, b.status FROM pgbus.workflow_steps s JOIN pgbus.batches b USING (batch_id)
                    WHERE s.step_id = pg_temp.id('fo_empty_a')$$,
                  $$VALUES ('completed'::text, 'resolve'::text, 0, 'finished'::text)$$,
                  'an empty fan-out: the attempt completed (resolve) on an empty, finished batch');
SELECT is(pg_temp.attempts('fo_empty'), 'notify#1:completed,ship#1:scheduled', 'an empty fan-out: the next step is scheduled');
SELECT is((SELECT b.on_complete FROM pgbus.workflow_steps s JOIN pgbus.batches b USING (batch_id)
           WHERE s.step_id = pg_temp.id('fo_empty_a')), NULL, 'an empty fan-out: its batch has no callback');
SELECT is((SELECT count(*) FROM pg_temp.queue_messages('t_wfw_fo_empty') m
           WHERE m ->> 'job_class' = 'pgbus.workflow:BatchFinishedJob'), 0::bigint,
          'an empty fan-out: no BatchFinishedJob is sent');
SELECT is(pg_temp.events('fo_empty', pg_temp.id('fo_empty_ev')), 'fan_out_opened,step_waiting,fan_out_finished,step_completed,step_scheduled',
          'an empty fan-out: events opened, waiting, finished, completed, scheduled');

-- A refused park opens no batch: the run was cancelled while the step ran.
DO $d$ BEGIN PERFORM pg_temp.go('fo_refused', pg_temp.fan()); PERFORM pg_temp.cmd('fo_refused', 'cancel'); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('fo_refused'), 'park', fan_out => pg_temp.jobs('fo_refused', 2)),
          '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb, 'fan-out park on a cancelled run: not_allowed');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fo_refused')::text), 0::bigint,
          '... no batch opened');
SELECT is((SELECT count(*) FROM pg_temp.queue_messages('t_wfw_fo_refused_m')), 0::bigint, '... no member enqueued');
SELECT results_eq($$SELECT status, outcome, batch_id FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('fo_refused')$$,
                  $$VALUES ('superseded'::text, 'park'::text, NULL::uuid)$$, '... the attempt is superseded');

-- fan_out goes only with park; malformed jobs are refused.
DO $d$ BEGIN PERFORM pg_temp.go('fo_bad', pg_temp.fan()); END $d$;
SELECT pg_temp.mark('fo_bad_state', pg_temp.state('fo_bad'));
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'complete', fan_out => pg_temp.jobs('fo_bad', 1)) ->> 'raised', '22023',
          'fan_out with complete raises invalid_parameter_value');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'rewait', fan_out => pg_temp.jobs('fo_bad', 1)) ->> 'raised', '22023',
          'fan_out with rewait raises');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'park', fan_out => '[{"job_class": "app:Notify", "arguments": {}}]') ->> 'raised', '22023',
          'a fan-out job without a queue raises');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'park', fan_out => '[{"queue": "q", "job_class": "app:Notify", "arguments": []}]') ->> 'raised', '22023',
          'a fan-out job whose arguments are not an object raises');
SELECT is(pg_temp.end_step(pg_temp.cur('fo_bad'), 'park', fan_out => '{"queue": "q"}') ->> 'raised', '22023',
          'a fan_out that is not an array raises');
SELECT is(pg_temp.state('fo_bad'), pg_temp.marked('fo_bad_state'), '... nothing changed');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fo_bad')::text), 0::bigint, '... no batch left');

SELECT * FROM finish();
ROLLBACK;
