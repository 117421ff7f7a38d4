-- pgTAP tests for sql/functions/075_workflow_waiting.sql: Claiming a signal (workflow_end_step signal_id): pending -> claimed -> consumed.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(30);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- Claiming a signal (workflow_end_step signal_id): pending -> claimed -> consumed
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('claim', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_s1', pg_temp.signal('claim', 'paid', '{"n": 1}') -> 'signal_id');
SELECT pg_temp.mark('claim_s2', pg_temp.signal('claim', 'paid', '{"n": 2}') -> 'signal_id');
SELECT is(pg_temp.read('claim', 'claim'), 1, 'setup: the gate step begins');
SELECT pg_temp.mark('claim_a1', to_jsonb(pg_temp.cur('claim')));
SELECT pg_temp.mark_ev('claim_ev');
-- The step takes s1 and fails, pausing the run: s1 stays claimed.
SELECT is(pg_temp.end_step(pg_temp.id('claim_a1'), 'pause', error => '{"class": "app.Boom", "message": "boom"}',
                           signal_id => pg_temp.id('claim_s1')) ->> 'status', 'paused',
          'a step that takes a signal and fails (pause): paused');
SELECT results_eq($$SELECT status, step_name, step_id, pg_temp.recent(claimed_at), consumed_at FROM pgbus.workflow_signals
                    WHERE signal_id = pg_temp.id('claim_s1')$$,
                  $$VALUES ('claimed'::text, 'capture'::text, pg_temp.id('claim_a1'), true, NULL::timestamptz)$$,
                  'the signal is claimed by the step and its attempt, not consumed');
SELECT results_eq($$SELECT status, outcome, signal_id, error_class FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('claim_a1')$$,
                  $$VALUES ('failed'::text, 'pause'::text, pg_temp.id('claim_s1'), 'app.Boom'::text)$$,
                  'the failed attempt records the signal it took');
SELECT results_eq($$SELECT event, step_id, actor, details FROM pg_temp.evs('claim', 'claim_ev')$$,
                  $$VALUES ('signal_claimed'::text, pg_temp.id('claim_a1'), NULL::text,
                            jsonb_build_object('signal_id', pg_temp.id('claim_s1'), 'name', 'paid', 'step', 'capture')),
                           ('step_failed', pg_temp.id('claim_a1'), NULL, '{"step": "capture", "attempt": 1, "verb": "pause", "error_class": "app.Boom"}'),
                           ('paused', pg_temp.id('claim_a1'), 'step', '{"error_class": "app.Boom"}')$$,
                  'events signal_claimed, step_failed, paused');
SELECT is(pg_temp.signals('claim'), 'paid:claimed,paid:pending', 'the other signal stays pending');
SELECT pg_temp.mark('claim_claimed_at', to_jsonb((pg_temp.sig(pg_temp.id('claim_s1'))).claimed_at));
-- The next attempt sees it as claimed and takes it again: no second signal_claimed; consumed on completion.
SELECT is(pg_temp.cmd('claim', 'resume') ->> 'status', 'ready', 'setup: resumed');
SELECT is(pg_temp.read('claim2', 'claim'), 1, 'setup: attempt 2 begins');
SELECT is((pg_temp.ctx('claim2') -> 'signals' -> 0) - 'created_at',
          jsonb_build_object('signal_id', pg_temp.id('claim_s1'), 'name', 'paid', 'payload', '{"n": 1}'::jsonb, 'idempotency_key', NULL,
                             'status', 'claimed'),
          'attempt 2''s context: the claimed signal first');
SELECT pg_temp.mark('claim_a2', to_jsonb(pg_temp.cur('claim')));
SELECT pg_temp.mark_ev('claim_ev2');
SELECT is(pg_temp.end_step(pg_temp.id('claim_a2'), 'complete', '{"captured": true}', signal_id => pg_temp.id('claim_s1')) ->> 'status', 'ready',
          'attempt 2 completes taking the claimed signal again');
SELECT results_eq($$SELECT status, step_id, claimed_at = (pg_temp.marked('claim_claimed_at') #>> '{}')::timestamptz, pg_temp.recent(consumed_at)
                    FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('claim_s1')$$,
                  $$VALUES ('consumed'::text, pg_temp.id('claim_a2'), true, true)$$,
                  'the signal is consumed, moved to attempt 2, its claimed_at kept');
SELECT is(pg_temp.events('claim', pg_temp.id('claim_ev2')), 'step_completed,step_scheduled', 'taking it again writes no signal_claimed');
SELECT results_eq($$SELECT status, signal_id, output FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('claim_a2')$$,
                  $$VALUES ('completed'::text, pg_temp.id('claim_s1'), '{"captured": true}'::jsonb)$$,
                  'attempt 2 completed with the signal recorded');
SELECT is(pg_temp.signals('claim'), 'paid:consumed,paid:pending', 'the untaken signal is still pending');

-- A claimed signal survives a reattempt too.
DO $d$ BEGIN PERFORM pg_temp.go('claim_re', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_re_s', pg_temp.signal('claim_re', 'paid') -> 'signal_id');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_re'), 'reattempt', signal_id => pg_temp.id('claim_re_s')) ->> 'status', 'ready',
          'a step that takes a signal and asks for a reattempt: ready');
SELECT results_eq($$SELECT g.status, s.status FROM pgbus.workflow_signals g JOIN pgbus.workflow_steps s ON s.step_id = g.step_id
                    WHERE g.signal_id = pg_temp.id('claim_re_s')$$,
                  $$VALUES ('claimed'::text, 'interrupted'::text)$$, '... the signal stays claimed by the interrupted attempt');
SELECT is(pg_temp.read('claim_re2', 'claim_re'), 1, 'setup: attempt 2 begins');
SELECT is(pg_temp.ctx('claim_re2') #>> '{signals,0,status}', 'claimed', '... its context has the claimed signal');

-- A signal that is not pending for this run cannot be taken: invalid_parameter_value, nothing changes.
DO $d$ BEGIN PERFORM pg_temp.go('claim_bad', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_bad_s', pg_temp.signal('claim_bad', 'paid') -> 'signal_id');
SELECT pg_temp.mark('claim_bad_state', pg_temp.state('claim_bad'));
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => pg_temp.id('claim_s1')) ->> 'raised', '22023',
          'taking a consumed signal of another run raises invalid_parameter_value');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => pg_temp.id('claim_s2')) ->> 'raised', '22023',
          'taking a pending signal of another run raises');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => -1) ->> 'raised', '22023',
          'taking an unknown signal raises');
SELECT is(pg_temp.state('claim_bad'), pg_temp.marked('claim_bad_state'), '... and nothing changed');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'skip', signal_id => pg_temp.id('claim_bad_s')) ->> 'status', 'ready',
          'a step that skips taking a signal');
SELECT is(pg_temp.signals('claim_bad'), 'paid:consumed', '... consumes it');
-- A consumed signal of its own run cannot be taken again.
SELECT is(pg_temp.read('claim_bad2', 'claim_bad'), 1, 'setup: the next step begins');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_bad'), 'complete', signal_id => pg_temp.id('claim_bad_s')) ->> 'raised', '22023',
          'taking a consumed signal of the run raises');

-- A refused end takes no signal: the run was cancelled while the step ran.
DO $d$ BEGIN PERFORM pg_temp.go('claim_refused', pg_temp.gate()); END $d$;
SELECT pg_temp.mark('claim_refused_s', pg_temp.signal('claim_refused', 'paid') -> 'signal_id');
SELECT is(pg_temp.cmd('claim_refused', 'cancel') ->> 'status', 'cancelled', 'setup: cancelled while the step ran');
SELECT is(pg_temp.end_step(pg_temp.cur('claim_refused'), 'complete', signal_id => pg_temp.id('claim_refused_s')),
          '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb, 'a refused end with a signal: not_allowed');
SELECT results_eq($$SELECT status, step_id FROM pgbus.workflow_signals WHERE signal_id = pg_temp.id('claim_refused_s')$$,
                  $$VALUES ('pending'::text, NULL::bigint)$$, '... the signal stays pending, untaken');
SELECT is(pg_temp.events('claim_refused') LIKE '%signal_claimed%', false, '... no signal_claimed event');

SELECT * FROM finish();
ROLLBACK;
