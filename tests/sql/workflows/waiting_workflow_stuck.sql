-- pgTAP tests for sql/functions/075_workflow_waiting.sql: workflow_stuck: waiting_overdue.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(28);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_stuck: waiting_overdue
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('st_old', pg_temp.gate(NULL)); PERFORM pg_temp.park('st_old'); END $d$;
UPDATE pgbus.workflow_steps SET waiting_since = now() - interval '8 days', scheduled_at = least(scheduled_at, now() - interval '8 days') WHERE step_id = pg_temp.cur('st_old');
DO $d$ BEGIN PERFORM pg_temp.go('st_new', pg_temp.gate(NULL)); PERFORM pg_temp.park('st_new'); END $d$;
UPDATE pgbus.workflow_steps SET waiting_since = now() - interval '2 hours', scheduled_at = least(scheduled_at, now() - interval '2 hours') WHERE step_id = pg_temp.cur('st_new');
SELECT results_eq($$SELECT workflow_class, step_name, reason, error_class, since FROM pgbus.workflow_stuck()
                    WHERE workflow_id IN (pg_temp.run('st_old'), pg_temp.run('st_new'))$$,
                  $$VALUES ('t_wfw_st_old'::text, 'capture'::text, 'waiting_overdue'::text, NULL::text, now() - interval '8 days')$$,
                  'workflow_stuck: a run waiting past 7 days is waiting_overdue since it began waiting; one waiting 2 hours is not stuck');
SELECT set_eq($$SELECT workflow_class, reason FROM pgbus.workflow_stuck(waiting_threshold => interval '1 hour')
                WHERE workflow_id IN (pg_temp.run('st_old'), pg_temp.run('st_new'))$$,
              $$VALUES ('t_wfw_st_old', 'waiting_overdue'), ('t_wfw_st_new', 'waiting_overdue')$$,
              'workflow_stuck: with a 1-hour threshold both are waiting_overdue');
SELECT is((SELECT count(*) FROM pgbus.workflow_stuck(waiting_threshold => interval '9 days') WHERE workflow_id = pg_temp.run('st_old')), 0::bigint,
          'workflow_stuck: under a 9-day threshold the 8-day wait is not stuck');

-------------------------------------------------------------------------------------------------
-- workflow_sweep: wait timeouts and the lost-callback repair (from no runs at all, so that its
-- answer is exact; undone by the ROLLBACK)
-------------------------------------------------------------------------------------------------
DELETE FROM pgbus.workflows;
-- Past their deadline: one per on_timeout, one with none (pause), a fan-out (cancel).
DO $d$
BEGIN
    PERFORM pg_temp.go('sw_pause', pg_temp.gate(60, 'pause'));   PERFORM pg_temp.park('sw_pause');
    PERFORM pg_temp.go('sw_default', pg_temp.gate(60));          PERFORM pg_temp.park('sw_default');
    PERFORM pg_temp.go('sw_cancel', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('sw_cancel');
    PERFORM pg_temp.go('sw_skip', pg_temp.gate(60, 'skip'));     PERFORM pg_temp.park('sw_skip');
    PERFORM pg_temp.go('sw_run', pg_temp.gate(60, 'run'));       PERFORM pg_temp.park('sw_run');
    PERFORM pg_temp.fan_out('sw_fan', pg_temp.fan(NULL, 60, 'cancel'), 2);
    -- Not to time out: its deadline is ahead; paused (its deadline forced into the past).
    PERFORM pg_temp.go('sw_future', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('sw_future');
    PERFORM pg_temp.go('sw_paused', pg_temp.gate(60, 'cancel')); PERFORM pg_temp.park('sw_paused');
    PERFORM pg_temp.cmd('sw_paused', 'pause');
END
$d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() - interval '1 minute'
WHERE workflow_id IN (SELECT pg_temp.run(n) FROM unnest(ARRAY['sw_pause', 'sw_default', 'sw_cancel', 'sw_skip', 'sw_run', 'sw_fan', 'sw_paused']) n);
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '1 minute' WHERE workflow_id = pg_temp.run('sw_future');
-- Fan-outs: finished 10 minutes ago, its callback lost (to repair); finished just now (its
-- callback still due); still processing (members left); its batch row gone (to pause, on_batch_failure skip notwithstanding).
DO $d$
BEGIN
    PERFORM pg_temp.fan_out('rp_lost', pg_temp.fan(), 2);
    PERFORM pgbus.batch_member_done((pg_temp.batch('rp_lost')).batch_id, 'completed', 2);
    PERFORM pg_temp.fan_out('rp_recent', pg_temp.fan(), 1);
    PERFORM pgbus.batch_member_done((pg_temp.batch('rp_recent')).batch_id, 'completed');
    PERFORM pg_temp.fan_out('rp_processing', pg_temp.fan(), 2);
    PERFORM pgbus.batch_member_done((pg_temp.batch('rp_processing')).batch_id, 'completed');
    PERFORM pg_temp.fan_out('rp_gone', pg_temp.fan('skip'), 2);
END
$d$;
UPDATE pgbus.batches SET finished_at = now() - interval '10 minutes' WHERE batch_id = (pg_temp.batch('rp_lost')).batch_id;
UPDATE pgbus.batches SET created_at = now() - interval '1 day' WHERE batch_id = (pg_temp.batch('rp_processing')).batch_id;
SELECT pg_temp.mark('rp_gone_b', to_jsonb((pg_temp.batch('rp_gone')).batch_id));
DELETE FROM pgbus.batches WHERE batch_id = (pg_temp.batch('rp_gone')).batch_id;
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE status = 'waiting'), 11::bigint, 'setup: eleven waiting runs, one paused');
SELECT pg_temp.mark('sw_a', (SELECT jsonb_object_agg(n, pg_temp.cur(n)) FROM unnest(ARRAY['sw_pause', 'sw_run', 'sw_future', 'sw_paused', 'rp_lost']) n));
SELECT pg_temp.mark('sw_run_msg', to_jsonb((pg_temp.att(pg_temp.cur('sw_run'))).msg_id));
SELECT pg_temp.mark_ev('sw_ev');

SELECT pg_temp.mark('sweep', pgbus.workflow_sweep());
SELECT set_eq(
    $$SELECT e - 'was' - 'error_class' FROM jsonb_array_elements(pg_temp.marked('sweep') -> 'timed_out') e$$,
    $$SELECT jsonb_build_object('workflow_id', pg_temp.run(n), 'workflow_class', pg_temp.cls(n), 'step', s, 'action', a, 'status', st)
      FROM (VALUES ('sw_pause', 'capture', 'pause', 'paused'), ('sw_default', 'capture', 'pause', 'paused'),
                   ('sw_cancel', 'capture', 'cancel', 'cancelled'), ('sw_skip', 'capture', 'skip', 'ready'),
                   ('sw_run', 'capture', 'run', 'ready'), ('sw_fan', 'notify', 'cancel', 'cancelled')) v(n, s, a, st)$$,
    'workflow_sweep: "timed_out" lists every run past its deadline with its step, on_timeout and new status');
SELECT is(pg_temp.marked('sweep') -> 'resolved', '2'::jsonb, 'workflow_sweep: "resolved" counts the lost callback and the gone batch');
SELECT results_eq($$SELECT pg_temp.marked('sweep') -> 'stalled', pg_temp.marked('sweep') -> 'resent', pg_temp.marked('sweep') -> 'deleted'$$,
                  $$VALUES ('[]'::jsonb, '0'::jsonb, '0'::jsonb)$$, 'workflow_sweep: nothing stalled, resent or deleted');

-- Timeouts.
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, s.outcome, s.error_class, s.error ->> 'message'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id IN (pg_temp.run('sw_pause'), pg_temp.run('sw_default')) ORDER BY w.workflow_class$$,
    $$VALUES ('paused'::text, 'error'::text, 'failed'::text, 'pause'::text, 'pgbus.workflow.WaitTimedOut'::text, 'step capture waited longer than 00:01:00'::text),
             ('paused', 'error', 'failed', 'pause', 'pgbus.workflow.WaitTimedOut', 'step capture waited longer than 00:01:00')$$,
    'workflow_sweep: on_timeout pause (explicit or by default): the attempt failed with WaitTimedOut, the run paused (error)');
SELECT results_eq($$SELECT event, actor, reason, details - 'waiting_since' FROM pg_temp.evs('sw_pause', 'sw_ev')$$,
                  $$VALUES ('wait_timed_out'::text, 'pgbus'::text, NULL::text, '{"step": "capture", "action": "pause", "wait_for": "paid"}'::jsonb),
                           ('step_failed', 'pgbus', 'wait timed out', '{"step": "capture", "attempt": 1, "verb": "pause", "error_class": "pgbus.workflow.WaitTimedOut"}'),
                           ('paused', 'pgbus', 'wait timed out', '{"error_class": "pgbus.workflow.WaitTimedOut"}')$$,
                  'workflow_sweep: timeout events by pgbus');
SELECT results_eq($$SELECT w.status, s.status, s.outcome FROM pgbus.workflows w JOIN pgbus.workflow_steps s USING (workflow_id)
                    WHERE w.workflow_id = pg_temp.run('sw_cancel')$$,
                  $$VALUES ('cancelled'::text, 'cancelled'::text, 'cancel'::text)$$, 'workflow_sweep: on_timeout cancel: the run and its attempt cancelled');
SELECT is(pg_temp.attempts('sw_skip'), 'capture#1:skipped,ship#1:scheduled', 'workflow_sweep: on_timeout skip: skipped, the next step scheduled');
SELECT results_eq(
    $$SELECT w.status, s.step_id, s.status, s.timed_out, s.msg_id <> pg_temp.id('sw_run_msg'), (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('sw_run')$$,
    $$VALUES ('ready'::text, (pg_temp.marked('sw_a') ->> 'sw_run')::bigint, 'scheduled'::text, true, true, true)$$,
    'workflow_sweep: on_timeout run: the same attempt scheduled with timed_out and a new visible message');
SELECT is(pg_temp.events('sw_run', pg_temp.id('sw_ev')), 'wait_timed_out,step_woken', 'workflow_sweep: on_timeout run: wait_timed_out, step_woken');
SELECT results_eq($$SELECT w.status, s.status, s.outcome FROM pgbus.workflows w JOIN pgbus.workflow_steps s USING (workflow_id)
                    WHERE w.workflow_id = pg_temp.run('sw_fan')$$,
                  $$VALUES ('cancelled'::text, 'cancelled'::text, 'cancel'::text)$$, 'workflow_sweep: a fan-out past its wait_timeout times out too');
SELECT is((pg_temp.ev('sw_fan', 'wait_timed_out')).details ->> 'batch_id', (pg_temp.att((pg_temp.ev('sw_fan', 'wait_timed_out')).step_id)).batch_id::text,
          '... its wait_timed_out names the batch');
SELECT results_eq(
    $$SELECT w.status, s.status, s.wait_deadline > now() FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_future')$$,
    $$VALUES ('waiting'::text, 'waiting'::text, true)$$, 'workflow_sweep: a wait before its deadline is left alone');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_paused')$$,
    $$VALUES ('paused'::text, 'manual'::text, 'waiting'::text)$$, 'workflow_sweep: a paused run is never timed out (even past a deadline)');
SELECT is(pg_temp.events('sw_future', pg_temp.id('sw_ev')) || pg_temp.events('sw_paused', pg_temp.id('sw_ev')), '',
          'workflow_sweep: ... no events for either');

-- Lost-callback repair.
SELECT is(pg_temp.attempts('rp_lost'), 'notify#1:completed,ship#1:scheduled', 'workflow_sweep: a fan-out whose batch finished long ago is resolved');
SELECT results_eq($$SELECT event, actor, reason, details ->> 'step' FROM pg_temp.evs('rp_lost', 'sw_ev')$$,
                  $$VALUES ('fan_out_repaired'::text, 'pgbus'::text, 'its batch callback was lost'::text, 'notify'::text),
                           ('fan_out_finished', 'pgbus', NULL, 'notify'), ('step_completed', 'pgbus', NULL, 'notify'),
                           ('step_scheduled', 'pgbus', NULL, 'ship')$$,
                  '... events fan_out_repaired, fan_out_finished, step_completed, step_scheduled by pgbus');
SELECT results_eq($$SELECT w.status, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    WHERE w.workflow_id IN (pg_temp.run('rp_recent'), pg_temp.run('rp_processing'))$$,
                  $$VALUES ('waiting'::text, 'waiting'::text), ('waiting', 'waiting')$$,
                  'workflow_sweep: a batch finished just now and one still processing are left alone');
SELECT is(pg_temp.events('rp_recent', pg_temp.id('sw_ev')) || pg_temp.events('rp_processing', pg_temp.id('sw_ev')), '', '... no events');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status, s.outcome, s.error_class, s.error ->> 'message'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('rp_gone')$$,
    $$VALUES ('paused'::text, 'error'::text, 'failed'::text, 'pause'::text, 'pgbus.workflow.FanOutBatchGone'::text,
              'the batch of notify is gone: its outcome is unknown'::text)$$,
    'workflow_sweep: a fan-out whose batch row is gone is paused with FanOutBatchGone (on_batch_failure skip notwithstanding)');
SELECT is(pg_temp.events('rp_gone', pg_temp.id('sw_ev')), 'fan_out_repaired,step_failed,paused', '... events fan_out_repaired, step_failed, paused');

-- The gauges, and a second sweep.
SELECT set_eq(
    $$SELECT e ->> 'workflow_class' AS c, e ->> 'status' AS s, (e ->> 'count')::int AS n
      FROM jsonb_array_elements(pg_temp.marked('sweep') -> 'runs') e$$,
    $$VALUES ('t_wfw_sw_pause', 'paused', 1), ('t_wfw_sw_default', 'paused', 1), ('t_wfw_sw_skip', 'ready', 1), ('t_wfw_sw_run', 'ready', 1),
             ('t_wfw_sw_future', 'waiting', 1), ('t_wfw_sw_paused', 'paused', 1), ('t_wfw_rp_lost', 'ready', 1),
             ('t_wfw_rp_recent', 'waiting', 1), ('t_wfw_rp_processing', 'waiting', 1), ('t_wfw_rp_gone', 'paused', 1)$$,
    'workflow_sweep: "runs" counts the runs after its work by class and status');
SELECT is(pgbus.workflow_sweep() - 'runs' - 'stuck', '{"stalled": [], "timed_out": [], "resolved": 0, "resent": 0, "deleted": 0,
                                                     "failures_forgotten": 0, "moved": [], "failed": []}'::jsonb,
          'workflow_sweep: a second sweep times out and resolves nothing more');
-- The callback of the one finished just now arrives later: resolved as usual.
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.cur('rp_recent')) ->> 'status', 'ready', 'the late callback of a batch finished just now resolves it');
-- A long wait is waiting_overdue in the sweep's gauge.
UPDATE pgbus.workflow_steps SET waiting_since = now() - interval '8 days', scheduled_at = least(scheduled_at, now() - interval '8 days') WHERE step_id = pg_temp.cur('sw_future');
SELECT is((SELECT e FROM jsonb_array_elements(pgbus.workflow_sweep() -> 'stuck') e WHERE e ->> 'workflow_class' = 't_wfw_sw_future'),
          '{"workflow_class": "t_wfw_sw_future", "reason": "waiting_overdue", "count": 1}'::jsonb,
          'workflow_sweep: "stuck" counts a run waiting 8 days as waiting_overdue');

SELECT * FROM finish();
ROLLBACK;
