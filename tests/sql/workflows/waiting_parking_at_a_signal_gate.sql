-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Parking at a signal gate (workflow_end_step 'park').
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(42);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- Parking at a signal gate (workflow_end_step 'park')
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('gate', pg_temp.gate(3600)); END $d$;
SELECT is(pg_temp.ctx('gate') - 'step_id' - 'workflow_id' - 'scheduled_at' - 'begun_at' - 'body_started' - 'timeout',
          '{"workflow_class": "t_wfw_gate", "step_name": "capture", "attempt": 1, "arguments": {}, "subject_type": null,
            "subject_id": null, "definition_outdated": false,
            "wait_for": "paid", "signals": [], "timed_out": false, "waited": false}'::jsonb,
          'begin_step of a gate step: the context adds wait_for, signals (none), timed_out and waited');
SELECT pg_temp.mark('gate_a', to_jsonb(pg_temp.cur('gate')));
SELECT pg_temp.mark('gate_msg', to_jsonb((pg_temp.att(pg_temp.cur('gate'))).msg_id));
SELECT pg_temp.mark_ev('gate_ev');
SELECT is(pg_temp.park('gate', reason => 'waiting for the payment'),
          '{"ok": true, "status": "waiting", "workflow_class": "t_wfw_gate", "step": "capture"}'::jsonb,
          'park at a gate: answers ok, waiting');
SELECT results_eq($$SELECT status, pause_cause, current_step_id FROM pgbus.workflows WHERE workflow_id = pg_temp.run('gate')$$,
                  $$VALUES ('waiting'::text, NULL::text, pg_temp.id('gate_a'))$$,
                  'park at a gate: the run is waiting on the same attempt');
SELECT results_eq(
    $$SELECT status, outcome, wait_for, batch_id, pg_temp.recent(waiting_since), pg_temp.recent(wait_deadline, interval '1 hour'),
             wait_remaining, timed_out, signal_id, ended_at, error_class
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('gate_a')$$,
    $$VALUES ('waiting'::text, 'park'::text, 'paid'::text, NULL::uuid, true, true, NULL::interval, false, NULL::bigint,
              NULL::timestamptz, NULL::text)$$,
    'park at a gate: the attempt waits for its signal, since now, until now + wait_timeout; not ended');
SELECT cmp_ok((pg_temp.att(pg_temp.id('gate_a'))).wait_deadline - (pg_temp.att(pg_temp.id('gate_a'))).waiting_since,
              '<=', interval '1 hour', 'park at a gate: the deadline is at most wait_timeout after waiting_since');
SELECT is(pg_temp.has_msg('t_wfw_gate', pg_temp.id('gate_msg')), false, 'park at a gate: the step''s message leaves the queue');
SELECT is(pg_temp.has_msg('t_wfw_gate', pg_temp.id('gate_msg'), 'a'), true, '... into the archive');
SELECT results_eq($$SELECT event, step_id, actor, reason, details - 'deadline' FROM pg_temp.evs('gate', 'gate_ev')$$,
                  $$VALUES ('step_waiting'::text, pg_temp.id('gate_a'), NULL::text, 'waiting for the payment'::text,
                            '{"step": "capture", "verb": "park", "wait_for": "paid"}'::jsonb)$$,
                  'park at a gate: one step_waiting event with the step, verb, gate and reason');
SELECT is((pg_temp.ev('gate', 'step_waiting')).details ->> 'deadline', to_jsonb((pg_temp.att(pg_temp.id('gate_a'))).wait_deadline) #>> '{}',
          'park at a gate: ... and the deadline');
SELECT is(pg_temp.read('gate_again', 'gate'), 0, 'park at a gate: nothing is left to read');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('gate')), '{skip,signal,pause,cancel}'::text[],
          'workflow_available_actions of a waiting run: skip, signal, pause, cancel');
SELECT is(pg_temp.park('gate') ->> 'code', 'stale', 'park of an attempt already waiting: stale');

-- The same delivery's end said again after its gate was woken (a retried statement) is stale
-- and leaves the woken attempt's new message alone.
DO $d$ BEGIN PERFORM pg_temp.go('again', '[{"name": "capture", "wait_for": "paid"}]'); END $d$;
SELECT is(pg_temp.park('again') ->> 'status', 'waiting', 'setup: parked');
SELECT is(pg_temp.signal('again', 'paid') ->> 'woke', 'true', 'setup: woken, its attempt sent again');
SELECT is(pg_temp.park('again'), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'a second end of the delivery that parked: stale');
SELECT is((SELECT count(*) FROM pgmq.q_t_wfw_again WHERE msg_id = (pg_temp.att(pg_temp.cur('again'))).msg_id), 1::bigint,
          '... and the woken attempt''s message is still in its queue');

-- A gate without a wait_timeout waits without a deadline.
DO $d$ BEGIN PERFORM pg_temp.go('gate_forever', '[{"name": "capture", "wait_for": "paid"}]'); END $d$;
SELECT is(pg_temp.park('gate_forever') ->> 'status', 'waiting', 'park without wait_timeout: waiting');
SELECT results_eq($$SELECT status, wait_deadline, wait_remaining FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('gate_forever')$$,
                  $$VALUES ('waiting'::text, NULL::timestamptz, NULL::interval)$$, 'park without wait_timeout: no deadline');
SELECT is((pg_temp.ev('gate_forever', 'step_waiting')).details, '{"step": "capture", "verb": "park", "wait_for": "paid"}'::jsonb,
          'park without wait_timeout: step_waiting has no deadline');
-- ... and parked while its run was paused, it still has none after resume.
DO $d$ BEGIN PERFORM pg_temp.go('forever_paused', '[{"name": "capture", "wait_for": "paid"}]');
             PERFORM pg_temp.cmd('forever_paused', 'pause'); END $d$;
SELECT is(pg_temp.park('forever_paused') ->> 'status', 'paused', 'park without wait_timeout on a paused run: paused');
SELECT results_eq($$SELECT wait_deadline, wait_remaining FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('forever_paused')$$,
                  $$VALUES (NULL::timestamptz, NULL::interval)$$, 'park without wait_timeout on a paused run: nothing remaining');
SELECT is(pg_temp.cmd('forever_paused', 'resume') ->> 'status', 'waiting', 'park without wait_timeout, resumed: waiting');
SELECT is((SELECT wait_deadline FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('forever_paused')), NULL,
          'park without wait_timeout, resumed: still no deadline');

-- A step with neither a gate nor a fan-out cannot park.
DO $d$ BEGIN PERFORM pg_temp.go('no_gate', '[{"name": "a"}]'); END $d$;
SELECT pg_temp.mark('no_gate_state', pg_temp.state('no_gate'));
SELECT is(pg_temp.park('no_gate') ->> 'raised', '22023', 'park of a step without a gate or a fan-out raises invalid_parameter_value');
SELECT is(pg_temp.state('no_gate'), pg_temp.marked('no_gate_state'), '... and changes nothing');
SELECT is(pg_temp.end_step(pg_temp.cur('no_gate'), 'wake') ->> 'raised', '22023', 'wake is not a step verb');
SELECT is(pg_temp.end_step(pg_temp.cur('no_gate'), 'resolve') ->> 'raised', '22023', 'resolve is not a step verb');

-- Paused while the step ran: the step parks, the run stays paused, the wait's clock stopped.
DO $d$ BEGIN PERFORM pg_temp.go('park_paused', pg_temp.gate(600)); END $d$;
SELECT is(pg_temp.cmd('park_paused', 'pause', 'ops') ->> 'status', 'paused', 'setup: paused while the gate step ran');
SELECT pg_temp.mark_ev('park_paused_ev');
SELECT is(pg_temp.park('park_paused'), '{"ok": true, "status": "paused", "was": "paused", "workflow_class": "t_wfw_park_paused", "step": "capture"}'::jsonb,
          'park on a paused run: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('park_paused')$$,
                  $$VALUES ('paused'::text, 'manual'::text)$$, 'park on a paused run: the run stays paused (manual)');
SELECT results_eq(
    $$SELECT status, outcome, wait_for, pg_temp.recent(waiting_since), wait_deadline,
             wait_remaining BETWEEN interval '600 seconds' - (clock_timestamp() - now()) AND interval '600 seconds'
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('park_paused')$$,
    $$VALUES ('waiting'::text, 'park'::text, 'paid'::text, true, NULL::timestamptz, true)$$,
    'park on a paused run: the attempt waits with no deadline and the whole wait_timeout remaining');
SELECT is(pg_temp.events('park_paused', pg_temp.id('park_paused_ev')), 'step_waiting', 'park on a paused run: only step_waiting');
-- Resumed: the deadline is the resume time + what remained.
UPDATE pgbus.workflow_steps SET wait_remaining = interval '7 minutes' WHERE step_id = pg_temp.cur('park_paused');
SELECT pg_temp.mark_ev('park_paused_ev2');
SELECT is(pg_temp.cmd('park_paused', 'resume', 'ops', 'go on'), '{"ok": true, "status": "waiting"}'::jsonb,
          'resume of a run paused while its step waited: answers ok, waiting');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, pg_temp.recent(s.wait_deadline, interval '7 minutes'), s.wait_remaining
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('park_paused')$$,
    $$VALUES ('waiting'::text, NULL::text, 'waiting'::text, true, NULL::interval)$$,
    'resume of a run paused while waiting: waiting again, deadline = resume time + wait_remaining, nothing remaining kept');
SELECT results_eq($$SELECT event, actor, reason, details FROM pg_temp.evs('park_paused', 'park_paused_ev2')$$,
                  $$VALUES ('resumed'::text, 'ops'::text, 'go on'::text, '{"step": "capture"}'::jsonb)$$,
                  'resume of a run paused while waiting: only a resumed event');
SELECT is(pg_temp.attempts('park_paused'), 'capture#1:waiting', 'resume of a run paused while waiting: no new attempt');

-- Pause of a waiting run: the clock stops with what is left; the paused time does not count.
DO $d$ BEGIN PERFORM pg_temp.go('pw', pg_temp.gate(3600)); PERFORM pg_temp.park('pw'); END $d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '25 minutes' WHERE step_id = pg_temp.cur('pw');
SELECT pg_temp.mark_ev('pw_ev');
SELECT is(pg_temp.cmd('pw', 'pause', 'ops', 'hold on'), '{"ok": true, "status": "paused"}'::jsonb, 'pause of a waiting run: answers ok, paused');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, s.wait_deadline,
             s.wait_remaining BETWEEN interval '25 minutes' - (clock_timestamp() - now()) AND interval '25 minutes'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('pw')$$,
    $$VALUES ('paused'::text, 'manual'::text, 'waiting'::text, NULL::timestamptz, true)$$,
    'pause of a waiting run: the attempt still waits, its deadline cleared, what was left kept in wait_remaining');
SELECT results_eq($$SELECT event, step_id, actor, reason FROM pg_temp.evs('pw', 'pw_ev')$$,
                  $$VALUES ('paused'::text, pg_temp.cur('pw'), 'ops'::text, 'hold on'::text)$$, 'pause of a waiting run: a paused event');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('pw')), '{resume,resume_at,signal,cancel}'::text[],
          'workflow_available_actions of a run paused while waiting: resume, resume_at, signal, cancel');
-- As if the pause had lasted while 40 minutes were left: the resume counts from then.
UPDATE pgbus.workflow_steps SET wait_remaining = interval '40 minutes' WHERE step_id = pg_temp.cur('pw');
SELECT is(pg_temp.cmd('pw', 'resume') ->> 'status', 'waiting', 'resume: waiting');
SELECT is(pg_temp.recent((pg_temp.att(pg_temp.cur('pw'))).wait_deadline, interval '40 minutes'), true,
          'resume: the deadline is the resume time + the 40 minutes that remained (not the old deadline)');

SELECT * FROM finish();
ROLLBACK;
