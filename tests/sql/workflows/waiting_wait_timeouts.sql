-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Wait timeouts: workflow_expire_wait applies on_timeout.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(27);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- Wait timeouts: workflow_expire_wait applies on_timeout
-------------------------------------------------------------------------------------------------
-- pause: WaitTimedOut recorded, the run paused; a late signal stays pending.
DO $d$ BEGIN PERFORM pg_temp.go('ex_pause', pg_temp.gate(60, 'pause')); PERFORM pg_temp.park('ex_pause'); END $d$;
SELECT pg_temp.mark('ex_pause_a', to_jsonb(pg_temp.cur('ex_pause')));
SELECT pg_temp.mark_ev('ex_pause_ev');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_pause'), 'ops'), '{"ok": true, "status": "paused"}'::jsonb,
          'expire_wait, on_timeout pause: answers paused');
SELECT results_eq($$SELECT status, outcome, error, error_class, timed_out FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('ex_pause_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text,
                            '{"class": "pgbus.workflow.WaitTimedOut", "message": "step capture waited longer than 00:01:00"}'::jsonb,
                            'pgbus.workflow.WaitTimedOut'::text, false)$$,
                  'on_timeout pause: the attempt failed with WaitTimedOut');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('ex_pause')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'on_timeout pause: the run is paused (error)');
SELECT results_eq($$SELECT event, actor, reason, details - 'waiting_since' FROM pg_temp.evs('ex_pause', 'ex_pause_ev')$$,
                  $$VALUES ('wait_timed_out'::text, 'ops'::text, NULL::text, '{"step": "capture", "action": "pause", "wait_for": "paid"}'::jsonb),
                           ('step_failed', 'ops', 'wait timed out', '{"step": "capture", "attempt": 1, "verb": "pause", "error_class": "pgbus.workflow.WaitTimedOut"}'),
                           ('paused', 'ops', 'wait timed out', '{"error_class": "pgbus.workflow.WaitTimedOut"}')$$,
                  'on_timeout pause: events wait_timed_out, step_failed, paused by the caller');
SELECT is(((pg_temp.ev('ex_pause', 'wait_timed_out')).details ->> 'waiting_since')::timestamptz, (pg_temp.att(pg_temp.id('ex_pause_a'))).waiting_since,
          'wait_timed_out names when the step began waiting');
SELECT is(pg_temp.signal('ex_pause', 'paid') - 'signal_id', '{"ok": true, "status": "paused", "duplicate_delivery": false, "woke": false}'::jsonb,
          'a signal after the timeout: taken, wakes nothing');
SELECT is(pg_temp.signals('ex_pause'), 'paid:pending', '... it stays pending');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_pause')), '{"ok": false, "code": "not_allowed", "status": "paused"}'::jsonb,
          'expire_wait of a paused run: not_allowed');

-- run: the same attempt goes out again with timed_out.
DO $d$ BEGIN PERFORM pg_temp.go('ex_run', pg_temp.gate(60, 'run')); PERFORM pg_temp.park('ex_run'); END $d$;
SELECT pg_temp.mark('ex_run_a', to_jsonb(pg_temp.cur('ex_run')));
SELECT pg_temp.mark('ex_run_msg', to_jsonb((pg_temp.att(pg_temp.cur('ex_run'))).msg_id));
SELECT pg_temp.mark_ev('ex_run_ev');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_run')), '{"ok": true, "status": "ready"}'::jsonb, 'expire_wait, on_timeout run: answers ready');
SELECT results_eq(
    $$SELECT w.status, s.step_id, s.status, s.timed_out, s.msg_id <> pg_temp.id('ex_run_msg'), (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('ex_run')$$,
    $$VALUES ('ready'::text, pg_temp.id('ex_run_a'), 'scheduled'::text, true, true, true)$$,
    'on_timeout run: the run ready, the same attempt scheduled with timed_out and a new visible message');
SELECT is(pg_temp.has_msg('t_wfw_ex_run', pg_temp.id('ex_run_msg'), 'a'), true, 'on_timeout run: the parked message stays archived');
SELECT results_eq($$SELECT event, actor, details - 'waiting_since' FROM pg_temp.evs('ex_run', 'ex_run_ev')$$,
                  $$VALUES ('wait_timed_out'::text, 'pgbus'::text, '{"step": "capture", "action": "run", "wait_for": "paid"}'::jsonb),
                           ('step_woken', 'pgbus', '{"step": "capture", "timed_out": true}')$$,
                  'on_timeout run: events wait_timed_out and step_woken (timed_out), by pgbus by default');
SELECT is(pg_temp.read('ex_run2', 'ex_run'), 1, 'on_timeout run: the step is read again');
SELECT results_eq($$SELECT (pg_temp.ctx('ex_run2') ->> 'timed_out')::boolean, (pg_temp.ctx('ex_run2') ->> 'waited')::boolean,
                           (pg_temp.ctx('ex_run2') ->> 'step_id')::bigint$$,
                  $$VALUES (true, true, pg_temp.id('ex_run_a'))$$, 'on_timeout run: its context says timed_out and waited');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_run')), '{"ok": false, "code": "not_allowed", "status": "running"}'::jsonb,
          'expire_wait of a running run: not_allowed');
SELECT is(pgbus.workflow_expire_wait(gen_random_uuid()), '{"ok": false, "code": "not_found"}'::jsonb, 'expire_wait of an unknown run: not_found');

-- Woken by its timeout, then paused before it ran and resumed: the step should still run timed out.
DO $d$ BEGIN PERFORM pg_temp.go('ex_run_paused', pg_temp.gate(60, 'run')); PERFORM pg_temp.park('ex_run_paused'); END $d$;
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_run_paused')) ->> 'status', 'ready', 'setup: woken by its timeout');
SELECT is(pg_temp.cmd('ex_run_paused', 'pause') ->> 'status', 'paused', 'setup: paused before the woken step ran');
SELECT is(pg_temp.cmd('ex_run_paused', 'resume') ->> 'status', 'ready', 'setup: resumed');
SELECT is(pg_temp.read('ex_run_paused2', 'ex_run_paused'), 1, 'setup: the step begins');
SELECT is(pg_temp.ctx('ex_run_paused2') -> 'timed_out', 'true'::jsonb,
          'on_timeout run, paused and resumed before the step ran: its context still says timed_out');

-- cancel and skip.
DO $d$ BEGIN PERFORM pg_temp.go('ex_cancel', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('ex_cancel'); END $d$;
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_cancel')), '{"ok": true, "status": "cancelled"}'::jsonb, 'expire_wait, on_timeout cancel: cancelled');
SELECT results_eq($$SELECT status, outcome, error FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('ex_cancel')$$,
                  $$VALUES ('cancelled'::text, 'cancel'::text, NULL::jsonb)$$, 'on_timeout cancel: the attempt is cancelled, no error');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('ex_cancel')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'on_timeout cancel: the run is cancelled');
DO $d$ BEGIN PERFORM pg_temp.go('ex_skip', pg_temp.gate(60, 'skip')); PERFORM pg_temp.park('ex_skip'); END $d$;
SELECT pg_temp.mark_ev('ex_skip_ev');
SELECT is(pgbus.workflow_expire_wait(pg_temp.run('ex_skip')), '{"ok": true, "status": "ready"}'::jsonb, 'expire_wait, on_timeout skip: ready');
SELECT is(pg_temp.attempts('ex_skip'), 'capture#1:skipped,ship#1:scheduled', 'on_timeout skip: the attempt skipped, the next step scheduled');
SELECT is(pg_temp.events('ex_skip', pg_temp.id('ex_skip_ev')), 'wait_timed_out,step_skipped,step_scheduled',
          'on_timeout skip: events wait_timed_out, step_skipped, step_scheduled');

SELECT * FROM finish();
ROLLBACK;
