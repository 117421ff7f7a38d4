-- pgTAP tests for sql/functions/075_workflow_waiting.sql: signal (workflow_command 'signal').
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(44);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- signal (workflow_command 'signal')
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('sig', pg_temp.gate(3600)); PERFORM pg_temp.park('sig'); END $d$;
SELECT pg_temp.mark('sig_a', to_jsonb(pg_temp.cur('sig')));
SELECT pg_temp.mark('sig_msg', to_jsonb((pg_temp.att(pg_temp.cur('sig'))).msg_id));
-- Another name: stored, nothing woken.
SELECT pg_temp.mark_ev('sig_ev0');
SELECT pg_temp.mark('sig_other', pg_temp.signal('sig', 'shipped', NULL, NULL, 'app'));
SELECT is(pg_temp.marked('sig_other') - 'signal_id', '{"ok": true, "status": "waiting", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal of another name: ok, the run still waiting, woke false');
SELECT results_eq($$SELECT w.status, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    WHERE w.workflow_id = pg_temp.run('sig')$$,
                  $$VALUES ('waiting'::text, 'waiting'::text)$$, 'signal of another name: the gate keeps waiting');
SELECT results_eq($$SELECT event, step_id, actor, details FROM pg_temp.evs('sig', 'sig_ev0')$$,
                  $$VALUES ('signal_received'::text, pg_temp.id('sig_a'), 'app'::text,
                            jsonb_build_object('signal_id', (pg_temp.marked('sig_other') ->> 'signal_id')::bigint, 'name', 'shipped'))$$,
                  'signal of another name: only signal_received');
-- The gate's name: stored pending with who and why, and the gate wakes.
SELECT pg_temp.mark_ev('sig_ev');
SELECT pg_temp.mark('sig_ans', pg_temp.cmd('sig', 'signal', 'billing', 'paid in full',
                                           '{"name": " paid ", "payload": {"amount": 12}, "idempotency_key": "pay-1"}'));
SELECT pg_temp.mark('sig_s', pg_temp.marked('sig_ans') -> 'signal_id');
SELECT is(pg_temp.marked('sig_ans'),
          jsonb_build_object('ok', true, 'status', 'ready', 'signal_id', pg_temp.id('sig_s'), 'duplicate_delivery', false, 'woke', true),
          'signal for the gate: ok, ready, woke true, with its signal_id');
SELECT results_eq(
    $$SELECT workflow_id, name, payload, idempotency_key, status, step_name, step_id, actor, reason, pg_temp.recent(created_at),
             claimed_at, consumed_at
      FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('sig_s')$$,
    $$VALUES (pg_temp.run('sig'), 'paid'::text, '{"amount": 12}'::jsonb, 'pay-1'::text, 'pending'::text, NULL::text, NULL::bigint,
              'billing'::text, 'paid in full'::text, true, NULL::timestamptz, NULL::timestamptz)$$,
    'signal: stored pending (the name trimmed) with payload, key, actor and reason; nobody took it yet');
SELECT results_eq(
    $$SELECT w.status, w.current_step_id, s.status, pg_temp.recent(s.scheduled_at), s.msg_id <> pg_temp.id('sig_msg'),
             (pg_temp.amsg(s.step_id)).vt <= clock_timestamp(), (pg_temp.amsg(s.step_id)).message -> 'kwargs'
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('sig')$$,
    $$VALUES ('ready'::text, pg_temp.id('sig_a'), 'scheduled'::text, true, true, true,
              jsonb_build_object('workflow_id', pg_temp.run('sig'), 'step_id', pg_temp.id('sig_a')))$$,
    'signal wakes the gate: the run ready, the same attempt scheduled now with a new visible StepJob message');
SELECT is(pg_temp.has_msg('t_wfw_sig', pg_temp.id('sig_msg'), 'a'), true, 'signal wakes the gate: the parked message stays archived');
SELECT is(pg_temp.has_msg('t_wfw_sig', pg_temp.id('sig_msg')), false, '... and out of the queue');
SELECT results_eq($$SELECT event, step_id, actor, reason, details FROM pg_temp.evs('sig', 'sig_ev')$$,
                  $$VALUES ('signal_received'::text, pg_temp.id('sig_a'), 'billing'::text, 'paid in full'::text,
                            jsonb_build_object('signal_id', pg_temp.id('sig_s'), 'name', 'paid', 'idempotency_key', 'pay-1')),
                           ('step_woken', pg_temp.id('sig_a'), 'billing', NULL,
                            jsonb_build_object('step', 'capture', 'signal_id', pg_temp.id('sig_s')))$$,
                  'signal for the gate: events signal_received and step_woken, by the signal''s actor');
SELECT is(pg_temp.attempts('sig'), 'capture#1:scheduled', 'signal for the gate: no new attempt');
-- The same key again: nothing stored, no event, answered as a duplicate.
SELECT pg_temp.mark('sig_state', pg_temp.state('sig'));
SELECT is(pg_temp.cmd('sig', 'signal', 'billing', NULL, '{"name": "paid", "payload": {"amount": 99}, "idempotency_key": "pay-1"}'),
          jsonb_build_object('ok', true, 'status', 'ready', 'signal_id', pg_temp.id('sig_s'), 'duplicate_delivery', true, 'woke', false),
          'signal with a key seen before: duplicate_delivery, the first signal''s id');
SELECT is(pg_temp.signal('sig', 'paid', NULL, '  pay-1 ') ->> 'duplicate_delivery', 'true',
          'signal with the same key padded with spaces: a duplicate too');
SELECT is(pg_temp.state('sig'), pg_temp.marked('sig_state'), 'duplicate deliveries: nothing stored, no event, nothing changed');
SELECT is((pg_temp.sig(pg_temp.id('sig_s'))).payload, '{"amount": 12}'::jsonb, 'duplicate delivery: the first payload is kept');
-- A blank or whitespace key is no key (#550): stored with a NULL key, never deduplicated.
SELECT pg_temp.mark('sig_b1', pg_temp.signal('sig', 'note', NULL, '   '));
SELECT pg_temp.mark('sig_b2', pg_temp.signal('sig', 'note', NULL, '   '));
SELECT pg_temp.mark('sig_b3', pg_temp.signal('sig', 'note', NULL, ''));
SELECT is(ARRAY[pg_temp.marked('sig_b1') ->> 'duplicate_delivery', pg_temp.marked('sig_b2') ->> 'duplicate_delivery',
                pg_temp.marked('sig_b3') ->> 'duplicate_delivery'], ARRAY['false', 'false', 'false'],
          'signals with a blank key (#550): none is a duplicate');
SELECT results_eq($$SELECT count(*), count(DISTINCT signal_id), count(idempotency_key) FROM pgbus.workflow_signals
                    WHERE workflow_id = pg_temp.run('sig') AND name = 'note'$$,
                  $$VALUES (3::bigint, 3::bigint, 0::bigint)$$, 'signals with a blank key: all three stored, with a NULL key');
SELECT is((SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('sig') AND event = 'signal_received'
             AND details ->> 'name' = 'note' AND NOT details ? 'idempotency_key'), 3::bigint,
          'signals with a blank key: three signal_received events without a key');
-- A key is per run: the same key on another run is a new signal; a blank reason is no reason.
DO $d$ BEGIN PERFORM pg_temp.start('sig_other_run', pg_temp.gate()); END $d$;
SELECT is(pg_temp.signal('sig_other_run', 'paid', NULL, 'pay-1', 'app', '   ') ->> 'duplicate_delivery', 'false',
          'the same key on another run: not a duplicate');
SELECT results_eq($$SELECT idempotency_key, reason FROM pgbus.workflow_signals WHERE workflow_id = pg_temp.run('sig_other_run')$$,
                  $$VALUES ('pay-1'::text, NULL::text)$$, '... stored with its key, a blank reason stored as NULL');
-- Invalid signals: refused, nothing changes.
SELECT pg_temp.mark('sig_state2', pg_temp.state('sig'));
SELECT is(pg_temp.cmd('sig', 'signal', 'app', NULL, '{"payload": {}}'),
          '{"ok": false, "code": "invalid", "status": "ready", "message": "a signal is {\"name\": 1-255 characters, \"payload\": {...}, \"idempotency_key\": at most 255 characters}"}'::jsonb,
          'signal without a name: invalid, with the shape of a signal');
SELECT is(pg_temp.signal('sig', '   ') ->> 'code', 'invalid', 'signal with a whitespace name: invalid');
SELECT is(pg_temp.signal('sig', repeat('n', 256)) ->> 'code', 'invalid', 'signal with a 256-character name: invalid');
SELECT is(pg_temp.signal('sig', 'paid', NULL, repeat('k', 256)) ->> 'code', 'invalid', 'signal with a 256-character key: invalid');
SELECT is(pg_temp.signal('sig', 'paid', '[1, 2]') ->> 'code', 'invalid', 'signal with an array payload: invalid');
SELECT is(pg_temp.signal('sig', 'paid', '"text"') ->> 'code', 'invalid', 'signal with a string payload: invalid');
SELECT is(pg_temp.cmd('sig', 'signal', 'app', NULL, '{"name": "paid", "payload": null}') ->> 'code', 'invalid',
          'signal with a null payload: invalid');
SELECT is(pg_temp.state('sig'), pg_temp.marked('sig_state2'), 'invalid signals: nothing changed');
SELECT is(pg_temp.signal('sig', repeat('n', 255), NULL, repeat('k', 255)) ->> 'ok', 'true', 'signal with a 255-character name and key: taken');
-- The woken step begins with the signal in its context and completes with it: consumed.
SELECT is(pg_temp.read('sig_woken', 'sig'), 1, 'the woken gate step is read');
SELECT is(pg_temp.ctx('sig_woken') #> '{signals,0,signal_id}', to_jsonb(pg_temp.id('sig_s')), '... with the signal in its context');
SELECT is(pg_temp.end_step(pg_temp.id('sig_a'), 'complete', signal_id => pg_temp.id('sig_s')) ->> 'status', 'ready',
          'the woken step completes taking the signal');
SELECT results_eq($$SELECT status, step_name, step_id, claimed_at IS NOT NULL, pg_temp.recent(consumed_at)
                    FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('sig_s')$$,
                  $$VALUES ('consumed'::text, 'capture'::text, pg_temp.id('sig_a'), true, true)$$,
                  'the signal is consumed by the attempt that completed');

-- Ended runs refuse a signal.
DO $d$ BEGIN PERFORM pg_temp.start('sig_cancelled', pg_temp.gate()); PERFORM pg_temp.cmd('sig_cancelled', 'cancel'); END $d$;
SELECT is(pg_temp.signal('sig_cancelled', 'paid'), '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb,
          'signal to a cancelled run: not_allowed');
SELECT is(pg_temp.signals('sig_cancelled'), '', '... nothing stored');
DO $d$ BEGIN PERFORM pg_temp.go('sig_finished', '[{"name": "a"}]'); PERFORM pg_temp.end_step(pg_temp.cur('sig_finished'), 'finished'); END $d$;
SELECT is(pg_temp.signal('sig_finished', 'paid'), '{"ok": false, "code": "not_allowed", "status": "finished"}'::jsonb,
          'signal to a finished run: not_allowed');
SELECT is(pg_temp.signals('sig_finished'), '', '... nothing stored');
SELECT is(pgbus.workflow_command(gen_random_uuid(), 'signal', 'app', NULL, '{"name": "paid"}'), '{"ok": false, "code": "not_found"}'::jsonb,
          'signal to an unknown run: not_found');
-- A running run takes it (the step will see it when it parks).
DO $d$ BEGIN PERFORM pg_temp.go('sig_running', pg_temp.gate()); END $d$;
SELECT is(pg_temp.signal('sig_running', 'paid') - 'signal_id', '{"ok": true, "status": "running", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal to a running run: stored, the run still running');

-- A paused run takes the signal and stays paused until resume, which wakes the gate.
DO $d$ BEGIN PERFORM pg_temp.go('sig_paused', pg_temp.gate()); PERFORM pg_temp.park('sig_paused'); PERFORM pg_temp.cmd('sig_paused', 'pause'); END $d$;
SELECT pg_temp.mark('sig_paused_a', to_jsonb(pg_temp.cur('sig_paused')));
SELECT pg_temp.mark_ev('sig_paused_ev');
SELECT pg_temp.mark('sig_paused_ans', pg_temp.signal('sig_paused', 'paid', '{"ok": 1}', 'p1', 'billing'));
SELECT is(pg_temp.marked('sig_paused_ans') - 'signal_id', '{"ok": true, "status": "paused", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal to a run paused while waiting: taken, the run stays paused, nothing woken');
SELECT results_eq($$SELECT w.status, w.pause_cause, s.status, g.status FROM pgbus.workflows w
                    JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                    JOIN pgbus.workflow_signals g ON g.workflow_id = w.workflow_id WHERE w.workflow_id = pg_temp.run('sig_paused')$$,
                  $$VALUES ('paused'::text, 'manual'::text, 'waiting'::text, 'pending'::text)$$,
                  'signal to a paused run: the run paused, the attempt waiting, the signal pending');
SELECT is(pg_temp.events('sig_paused', pg_temp.id('sig_paused_ev')), 'signal_received', 'signal to a paused run: only signal_received');
SELECT pg_temp.mark_ev('sig_paused_ev2');
SELECT is(pg_temp.cmd('sig_paused', 'resume', 'ops'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume of a paused run whose signal came meanwhile: ready (woken)');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.step_id, s.status, (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('sig_paused')$$,
    $$VALUES ('ready'::text, NULL::text, pg_temp.id('sig_paused_a'), 'scheduled'::text, true)$$,
    'resume wakes it: the same attempt scheduled with a visible message');
SELECT results_eq($$SELECT event, actor, details FROM pg_temp.evs('sig_paused', 'sig_paused_ev2')$$,
                  $$VALUES ('resumed'::text, 'ops'::text, '{"step": "capture"}'::jsonb),
                           ('step_woken', 'ops', jsonb_build_object('step', 'capture', 'signal_id', (pg_temp.marked('sig_paused_ans') ->> 'signal_id')::bigint))$$,
                  'resume wakes it: events resumed and step_woken by the operator');

SELECT * FROM finish();
ROLLBACK;
