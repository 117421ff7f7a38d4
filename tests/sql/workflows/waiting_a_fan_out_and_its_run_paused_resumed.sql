-- pgTAP tests for sql/functions/075_workflow_waiting.sql: A fan-out and its run paused, resumed, moved on.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(28);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- A fan-out and its run paused, resumed, moved on
-------------------------------------------------------------------------------------------------
-- Paused while waiting on the batch: the batch's end is not_allowed; resume resolves it.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp', pg_temp.fan(), 2); END $d$;
SELECT pg_temp.mark('fp_a', to_jsonb(pg_temp.cur('fp')));
SELECT is(pg_temp.cmd('fp', 'pause', 'ops') ->> 'status', 'paused', 'setup: paused while waiting on its batch');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fp_a')), '{"ok": false, "code": "not_allowed", "status": "paused"}'::jsonb,
          'workflow_fan_out_finished while paused (members left): not_allowed');
SELECT is(pgbus.batch_member_done((pg_temp.batch('fp')).batch_id, 'completed', 2), true, 'setup: the batch finished while paused');
SELECT pg_temp.mark('fp_state', pg_temp.state('fp'));
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fp_a')), '{"ok": false, "code": "not_allowed", "status": "paused"}'::jsonb,
          'workflow_fan_out_finished while paused (batch finished): not_allowed');
SELECT is(pg_temp.state('fp'), pg_temp.marked('fp_state'), '... nothing changed');
SELECT pg_temp.mark_ev('fp_ev');
SELECT is(pg_temp.cmd('fp', 'resume', 'ops'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume of a run whose batch finished while paused: ready (resolved)');
SELECT is(pg_temp.attempts('fp'), 'notify#1:completed,ship#1:scheduled', '... the step completed and the next is scheduled');
SELECT is(pg_temp.events('fp', pg_temp.id('fp_ev')), 'resumed,fan_out_finished,step_completed,step_scheduled',
          '... events resumed, fan_out_finished, step_completed, step_scheduled');
SELECT is((pg_temp.ev('fp', 'fan_out_finished')).actor, 'ops', '... fan_out_finished by the operator who resumed');

-- Resumed while the batch still runs: it keeps waiting on that batch.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_running', pg_temp.fan(), 2); PERFORM pg_temp.cmd('fp_running', 'pause'); END $d$;
SELECT pg_temp.mark('fp_running_b', to_jsonb((pg_temp.batch('fp_running')).batch_id));
SELECT is(pg_temp.cmd('fp_running', 'resume') ->> 'status', 'waiting', 'resume while the batch still runs: waiting');
SELECT results_eq($$SELECT s.status, s.batch_id::text FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('fp_running')$$,
                  $$VALUES ('waiting'::text, pg_temp.marked('fp_running_b') #>> '{}')$$, '... on the same batch, the same attempt');

-- Paused while the batch finished with a dead-lettered member: resume applies on_batch_failure (pause).
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_failed', pg_temp.fan('pause'), 3); PERFORM pg_temp.cmd('fp_failed', 'pause'); END $d$;
SELECT pg_temp.mark('fp_failed_a', to_jsonb(pg_temp.cur('fp_failed')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fp_failed')).batch_id, 'discarded', 3), true, 'setup: the batch failed while paused');
SELECT pg_temp.mark('fp_failed_ans', pg_temp.cmd('fp_failed', 'resume'));
SELECT results_eq($$SELECT status, outcome, error ->> 'message' FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fp_failed_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text, '3 of 3 jobs dead-lettered'::text)$$,
                  'resume of a run whose batch failed meanwhile: the attempt failed with FanOutFailed');
SELECT is(pg_temp.marked('fp_failed_ans'), '{"ok": true, "status": "paused"}'::jsonb, '... resume answers paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fp_failed')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, '... the run is paused (error)');

-- The batch row deleted while paused: resume pauses it with FanOutBatchGone.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_gone', pg_temp.fan('skip'), 2); PERFORM pg_temp.cmd('fp_gone', 'pause'); END $d$;
SELECT pg_temp.mark('fp_gone_a', to_jsonb(pg_temp.cur('fp_gone')));
DELETE FROM pgbus.batches WHERE batch_id = (pg_temp.batch('fp_gone')).batch_id;
SELECT pg_temp.mark_ev('fp_gone_ev');
SELECT pg_temp.mark('fp_gone_ans', pg_temp.cmd('fp_gone', 'resume', 'ops'));
SELECT results_eq($$SELECT status, outcome, error FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fp_gone_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text,
                            '{"class": "pgbus.workflow.FanOutBatchGone", "message": "the batch of notify is gone: its outcome is unknown"}'::jsonb)$$,
                  'resume of a run whose batch row is gone: the attempt failed with FanOutBatchGone (pause, whatever on_batch_failure says)');
SELECT is(pg_temp.marked('fp_gone_ans'), '{"ok": true, "status": "paused"}'::jsonb, '... resume answers paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fp_gone')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, '... the run is paused (error)');
SELECT is(pg_temp.events('fp_gone', pg_temp.id('fp_gone_ev')), 'resumed,step_failed,paused', '... events resumed, step_failed, paused');

-- resume_at of a run paused while waiting: the waiting attempt is superseded; its batch's end is stale.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fp_ra', pg_temp.fan(), 1); PERFORM pg_temp.cmd('fp_ra', 'pause'); END $d$;
SELECT pg_temp.mark('fp_ra_a', to_jsonb(pg_temp.cur('fp_ra')));
SELECT is(pg_temp.cmd('fp_ra', 'resume_at', 'ops', NULL, '{"step": "notify"}') ->> 'status', 'ready', 'resume_at of a run paused while waiting: ready');
SELECT results_eq($$SELECT status, pg_temp.recent(ended_at) FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fp_ra_a')$$,
                  $$VALUES ('superseded'::text, true)$$, '... the waiting attempt is superseded');
SELECT is(pg_temp.attempts('fp_ra'), 'notify#1:superseded,notify#2:scheduled', '... a new attempt of the step is scheduled');
SELECT is(pgbus.batch_member_done((pg_temp.att(pg_temp.id('fp_ra_a'))).batch_id, 'completed'), true, 'setup: the old batch finishes');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fp_ra_a')), '{"ok": false, "code": "stale", "status": "ready"}'::jsonb,
          'workflow_fan_out_finished of the superseded attempt: stale');
SELECT is(pg_temp.attempts('fp_ra'), 'notify#1:superseded,notify#2:scheduled', '... nothing changed');

-- The same for a gate.
DO $d$ BEGIN PERFORM pg_temp.go('ra_gate', pg_temp.gate()); PERFORM pg_temp.park('ra_gate'); PERFORM pg_temp.cmd('ra_gate', 'pause'); END $d$;
SELECT pg_temp.mark('ra_gate_a', to_jsonb(pg_temp.cur('ra_gate')));
SELECT is(pg_temp.cmd('ra_gate', 'resume_at', 'ops', NULL, '{"step": "ship"}') ->> 'status', 'ready', 'resume_at past a paused gate: ready');
SELECT is(pg_temp.attempts('ra_gate'), 'capture#1:superseded,ship#1:scheduled', '... the waiting gate attempt superseded, ship scheduled');
SELECT is(pg_temp.signal('ra_gate', 'paid') ->> 'woke', 'false', '... a signal for the old gate wakes nothing');

SELECT * FROM finish();
ROLLBACK;
