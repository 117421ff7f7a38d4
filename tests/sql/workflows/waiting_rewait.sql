-- pgTAP tests for sql/functions/075_workflow_waiting.sql: rewait: a woken step that takes nothing parks again, keeping its deadline.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(11);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- rewait: a woken step that takes nothing parks again, keeping its deadline
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('rewait', pg_temp.gate(3600)); PERFORM pg_temp.park('rewait'); END $d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '17 minutes', waiting_since = now() - interval '43 minutes'
WHERE step_id = pg_temp.cur('rewait');
SELECT pg_temp.mark('rewait_a', to_jsonb(pg_temp.cur('rewait')));
SELECT pg_temp.mark('rewait_s1', pg_temp.signal('rewait', 'paid', '{"amount": 1}') -> 'signal_id');
SELECT is(pg_temp.read('rewait_woken', 'rewait'), 1, 'rewait: the woken step is read again');
SELECT results_eq(
    $$SELECT (c ->> 'step_id')::bigint, (c ->> 'attempt')::int, c ->> 'wait_for', (c ->> 'waited')::boolean,
             (c ->> 'timed_out')::boolean, jsonb_array_length(c -> 'signals'), (c #>> '{signals,0,signal_id}')::bigint
      FROM (SELECT pg_temp.ctx('rewait_woken') AS c) x$$,
    $$VALUES (pg_temp.id('rewait_a'), 1, 'paid'::text, true, false, 1, pg_temp.id('rewait_s1'))$$,
    'begin_step of a woken gate step: the same attempt, waited true, the pending signal in its context');
SELECT pg_temp.mark_ev('rewait_ev');
SELECT is(pg_temp.end_step(pg_temp.id('rewait_a'), 'rewait', seen_signal_id => pg_temp.id('rewait_s1')) ->> 'status', 'waiting',
          'rewait having seen the pending signal: waiting');
SELECT results_eq(
    $$SELECT status, outcome, wait_deadline = now() + interval '17 minutes', waiting_since = now() - interval '43 minutes', wait_remaining
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('rewait_a')$$,
    $$VALUES ('waiting'::text, 'rewait'::text, true, true, NULL::interval)$$,
    'rewait: the attempt waits again with its original deadline and waiting_since');
SELECT results_eq($$SELECT event, details FROM pg_temp.evs('rewait', 'rewait_ev')$$,
                  $$VALUES ('step_waiting'::text, jsonb_build_object('step', 'capture', 'verb', 'rewait', 'wait_for', 'paid',
                                                                     'deadline', now() + interval '17 minutes'))$$,
                  'rewait: a step_waiting event (verb rewait, the original deadline); no wake');
SELECT is(pg_temp.signals('rewait'), 'paid:pending', 'rewait: the signal it did not take stays pending');
SELECT is((pg_temp.w('rewait')).status, 'waiting', 'rewait: the run waits');

-- A woken step that rewaits while its run is paused: the clock stops with what its kept deadline leaves.
DO $d$ BEGIN PERFORM pg_temp.go('rewait_paused', pg_temp.gate(3600)); PERFORM pg_temp.park('rewait_paused'); END $d$;
UPDATE pgbus.workflow_steps SET wait_deadline = now() + interval '12 minutes' WHERE step_id = pg_temp.cur('rewait_paused');
SELECT pg_temp.mark('rewait_paused_s', pg_temp.signal('rewait_paused', 'paid') -> 'signal_id');
SELECT is(pg_temp.read('rewait_paused_woken', 'rewait_paused'), 1, 'setup: the woken step begins');
SELECT is(pg_temp.cmd('rewait_paused', 'pause') ->> 'status', 'paused', 'setup: paused while it runs');
SELECT is(pg_temp.end_step(pg_temp.cur('rewait_paused'), 'rewait', seen_signal_id => pg_temp.id('rewait_paused_s')) ->> 'status', 'paused',
          'rewait on a paused run: paused');
SELECT results_eq(
    $$SELECT status, outcome, wait_deadline, wait_remaining BETWEEN interval '12 minutes' - (clock_timestamp() - now()) AND interval '12 minutes'
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('rewait_paused')$$,
    $$VALUES ('waiting'::text, 'rewait'::text, NULL::timestamptz, true)$$,
    'rewait on a paused run: waiting, no deadline, what the kept deadline left in wait_remaining');

SELECT * FROM finish();
ROLLBACK;
