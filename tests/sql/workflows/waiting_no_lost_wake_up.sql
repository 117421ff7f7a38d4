-- pgTAP tests for sql/functions/075_workflow_waiting.sql: No lost wake-up: a signal that came while the step ran wakes it as it parks.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- No lost wake-up: a signal that came while the step ran wakes it as it parks
-------------------------------------------------------------------------------------------------
-- The step saw s1 (and did not take it); s2 came while it ran; it parks having seen s1: woken at once.
DO $d$ BEGIN PERFORM pg_temp.start('lw', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_s1', pg_temp.signal('lw', 'paid') -> 'signal_id');
SELECT is(pg_temp.read('lw', 'lw'), 1, 'setup: the gate step begins having seen s1');
SELECT pg_temp.mark('lw_s2', pg_temp.signal('lw', 'paid') -> 'signal_id');
SELECT pg_temp.mark('lw_a', to_jsonb(pg_temp.cur('lw')));
SELECT pg_temp.mark('lw_msg', to_jsonb((pg_temp.att(pg_temp.cur('lw'))).msg_id));
SELECT pg_temp.mark_ev('lw_ev');
SELECT is(pg_temp.park('lw', pg_temp.id('lw_s1')), '{"ok": true, "status": "ready", "workflow_class": "t_wfw_lw", "step": "capture"}'::jsonb,
          'park having seen only an older signal than a pending one: answers ready (woken at once)');
SELECT results_eq(
    $$SELECT w.status, s.step_id, s.status, s.outcome, s.waiting_since IS NOT NULL, s.msg_id <> pg_temp.id('lw_msg'),
             (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('lw')$$,
    $$VALUES ('ready'::text, pg_temp.id('lw_a'), 'scheduled'::text, 'park'::text, true, true, true)$$,
    'no lost wake-up: the attempt is scheduled again with a new visible message');
SELECT is(pg_temp.has_msg('t_wfw_lw', pg_temp.id('lw_msg'), 'a'), true, 'no lost wake-up: the old message is archived');
SELECT results_eq($$SELECT event, actor, details - 'deadline' FROM pg_temp.evs('lw', 'lw_ev')$$,
                  $$VALUES ('step_waiting'::text, NULL::text, '{"step": "capture", "verb": "park", "wait_for": "paid"}'::jsonb),
                           ('step_woken', NULL, jsonb_build_object('step', 'capture', 'signal_id', pg_temp.id('lw_s2')))$$,
                  'no lost wake-up: step_waiting then step_woken naming the newer signal');
SELECT is(pg_temp.signals('lw'), 'paid:pending,paid:pending', 'no lost wake-up: both signals still pending');

-- With NULL seen (it saw nothing) a pending signal of its name wakes it too.
DO $d$ BEGIN PERFORM pg_temp.go('lw_null', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_null_s', pg_temp.signal('lw_null', 'paid') -> 'signal_id');
SELECT is(pg_temp.park('lw_null') ->> 'status', 'ready', 'park having seen nothing, a pending signal of its name: woken');

-- Having seen every pending signal of its name: it waits; a newer signal of another name does not wake it.
DO $d$ BEGIN PERFORM pg_temp.start('lw_seen', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_seen_s1', pg_temp.signal('lw_seen', 'paid') -> 'signal_id');
SELECT is(pg_temp.read('lw_seen', 'lw_seen'), 1, 'setup: the gate step begins');
SELECT pg_temp.mark('lw_seen_s2', pg_temp.signal('lw_seen', 'paid') -> 'signal_id');
SELECT pg_temp.mark('lw_seen_s3', pg_temp.signal('lw_seen', 'other') -> 'signal_id');
SELECT pg_temp.mark_ev('lw_seen_ev');
SELECT is(pg_temp.park('lw_seen', pg_temp.id('lw_seen_s2')) ->> 'status', 'waiting',
          'park having seen every pending signal of its name (a newer one of another name pending): waiting');
SELECT results_eq($$SELECT w.status, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    WHERE w.workflow_id = pg_temp.run('lw_seen')$$,
                  $$VALUES ('waiting'::text, 'waiting'::text)$$, '... the run and the attempt wait');
SELECT is(pg_temp.events('lw_seen', pg_temp.id('lw_seen_ev')), 'step_waiting', '... only step_waiting, no step_woken');
SELECT is(pg_temp.park('lw_seen') ->> 'code', 'stale', '... and it cannot park twice');

-- Having seen more than there is (a newer id than every pending one): it waits.
DO $d$ BEGIN PERFORM pg_temp.go('lw_ahead', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('lw_ahead_s', pg_temp.signal('lw_ahead', 'paid') -> 'signal_id');
SELECT is(pg_temp.park('lw_ahead', pg_temp.id('lw_ahead_s') + 1000) ->> 'status', 'waiting',
          'park with seen_signal_id above every pending one: waiting');

SELECT * FROM finish();
ROLLBACK;
