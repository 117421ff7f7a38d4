-- pgTAP tests for sql/functions/075_workflow_waiting.sql: skip and cancel from outside.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(18);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- skip and cancel from outside
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('sk', pg_temp.gate()); PERFORM pg_temp.park('sk'); END $d$;
SELECT pg_temp.mark('sk_a', to_jsonb(pg_temp.cur('sk')));
SELECT pg_temp.mark_ev('sk_ev');
SELECT is(pg_temp.cmd('sk', 'skip', 'alice', 'not needed'), '{"ok": true, "status": "ready"}'::jsonb, 'skip of a waiting run: answers ok, ready');
SELECT results_eq($$SELECT status, outcome, error_class, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('sk_a')$$,
                  $$VALUES ('skipped'::text, 'skip'::text, NULL::text, true)$$, 'skip: the waiting attempt is skipped');
SELECT is(pg_temp.attempts('sk'), 'capture#1:skipped,ship#1:scheduled', 'skip: the next step is scheduled');
SELECT results_eq($$SELECT event, step_id, actor, reason, details - 'scheduled_at' FROM pg_temp.evs('sk', 'sk_ev')$$,
                  $$VALUES ('step_skipped'::text, pg_temp.id('sk_a'), 'alice'::text, 'not needed'::text,
                            '{"step": "capture", "attempt": 1, "verb": "skip"}'::jsonb),
                           ('step_scheduled', pg_temp.cur('sk'), 'alice', NULL, '{"step": "ship", "attempt": 1}')$$,
                  'skip: step_skipped with the actor and reason, then step_scheduled');
SELECT pg_temp.mark('sk_state', pg_temp.state('sk'));
SELECT is(pg_temp.cmd('sk', 'skip', 'alice'), '{"ok": false, "code": "not_allowed", "status": "ready"}'::jsonb,
          'skip of a run that no longer waits: not_allowed');
SELECT is(pg_temp.state('sk'), pg_temp.marked('sk_state'), '... nothing changed');
DO $d$ BEGIN PERFORM pg_temp.go('sk_running', pg_temp.gate()); END $d$;
SELECT is(pg_temp.cmd('sk_running', 'skip') ->> 'code', 'not_allowed', 'skip of a running run: not_allowed');
DO $d$ BEGIN PERFORM pg_temp.go('sk_paused', pg_temp.gate()); PERFORM pg_temp.park('sk_paused'); PERFORM pg_temp.cmd('sk_paused', 'pause'); END $d$;
SELECT is(pg_temp.cmd('sk_paused', 'skip') ->> 'code', 'not_allowed', 'skip of a run paused while waiting: not_allowed');
-- Without an actor the skip is the operator's; a skipped gate that had claimed a signal consumes it.
DO $d$ BEGIN PERFORM pg_temp.fan_out('sk_fan', pg_temp.fan(), 2); END $d$;
SELECT is(pg_temp.cmd('sk_fan', 'skip') ->> 'status', 'ready', 'skip of a run waiting on a batch: ready');
SELECT is((pg_temp.ev('sk_fan', 'step_skipped')).actor, 'operator', '... step_skipped by "operator" when no actor is given');
SELECT is(pgbus.batch_member_done((pg_temp.att((pg_temp.ev('sk_fan', 'step_skipped')).step_id)).batch_id, 'completed', 2), true,
          'setup: the skipped step''s batch finishes');
SELECT is(pgbus.workflow_fan_out_finished((pg_temp.ev('sk_fan', 'step_skipped')).step_id) ->> 'code', 'stale', '... its end is stale');

DO $d$ BEGIN PERFORM pg_temp.go('cn', pg_temp.gate()); PERFORM pg_temp.park('cn'); END $d$;
SELECT pg_temp.mark('cn_a', to_jsonb(pg_temp.cur('cn')));
SELECT pg_temp.mark_ev('cn_ev');
SELECT is(pg_temp.cmd('cn', 'cancel', 'ops', 'order void'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel of a waiting run: answers cancelled');
SELECT results_eq($$SELECT status, outcome, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('cn_a')$$,
                  $$VALUES ('cancelled'::text, 'cancel'::text, true)$$, 'cancel of a waiting run: the waiting attempt is cancelled');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('cn')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'cancel of a waiting run: the run is cancelled');
SELECT results_eq($$SELECT event, step_id, actor, reason FROM pg_temp.evs('cn', 'cn_ev')$$,
                  $$VALUES ('cancelled'::text, NULL::bigint, 'ops'::text, 'order void'::text)$$, 'cancel of a waiting run: a cancelled event');
DO $d$ BEGIN PERFORM pg_temp.go('cn_paused', pg_temp.gate()); PERFORM pg_temp.park('cn_paused'); PERFORM pg_temp.cmd('cn_paused', 'pause'); END $d$;
SELECT is(pg_temp.cmd('cn_paused', 'cancel') ->> 'status', 'cancelled', 'cancel of a run paused while waiting: cancelled');
SELECT is(pg_temp.attempts('cn_paused'), 'capture#1:cancelled', '... its waiting attempt is cancelled');

SELECT * FROM finish();
ROLLBACK;
