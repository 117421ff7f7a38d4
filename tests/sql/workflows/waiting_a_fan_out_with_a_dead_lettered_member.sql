-- pgTAP tests for sql/functions/075_workflow_waiting.sql: A fan-out with a dead-lettered member: on_batch_failure.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(24);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- A fan-out with a dead-lettered member: on_batch_failure
-------------------------------------------------------------------------------------------------
-- pause (the default).
DO $d$ BEGIN PERFORM pg_temp.fan_out('fb_pause', pg_temp.fan(), 3); END $d$;
SELECT pg_temp.mark('fb_pause_a', to_jsonb(pg_temp.cur('fb_pause')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_pause')).batch_id, 'completed', 2), false, 'setup: two members completed');
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_pause')).batch_id, 'discarded'), true, 'setup: one dead-lettered');
SELECT pg_temp.mark_ev('fb_pause_ev');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fb_pause_a'), 'pgbus'),
          '{"ok": true, "status": "paused", "workflow_class": "t_wfw_fb_pause", "step": "notify"}'::jsonb,
          'on_batch_failure pause (default): answers paused');
SELECT results_eq($$SELECT status, outcome, error_class, error FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fb_pause_a')$$,
                  $$VALUES ('failed'::text, 'pause'::text, 'pgbus.workflow.FanOutFailed'::text,
                            '{"class": "pgbus.workflow.FanOutFailed", "message": "1 of 3 jobs dead-lettered"}'::jsonb)$$,
                  'on_batch_failure pause: the attempt failed with FanOutFailed, "1 of 3 jobs dead-lettered"');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fb_pause')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'on_batch_failure pause: the run is paused (error)');
SELECT results_eq($$SELECT event, actor, reason, details FROM pg_temp.evs('fb_pause', 'fb_pause_ev')$$,
                  $$VALUES ('fan_out_finished'::text, 'pgbus'::text, NULL::text,
                            jsonb_build_object('step', 'notify', 'batch_id', (pg_temp.batch('fb_pause')).batch_id, 'jobs', 3, 'dead_lettered', 1)),
                           ('step_failed', 'pgbus', 'fan-out failed',
                            '{"step": "notify", "attempt": 1, "verb": "pause", "error_class": "pgbus.workflow.FanOutFailed"}'),
                           ('paused', 'pgbus', 'fan-out failed', '{"error_class": "pgbus.workflow.FanOutFailed"}')$$,
                  'on_batch_failure pause: events fan_out_finished (1 dead-lettered), step_failed, paused');
SELECT is((SELECT reason FROM pgbus.workflow_stuck() WHERE workflow_id = pg_temp.run('fb_pause')), 'paused_error',
          'on_batch_failure pause: workflow_stuck says paused_error');
-- Resumed: the step again, attempt 2, which parks on a fresh batch.
SELECT is(pg_temp.cmd('fb_pause', 'resume') ->> 'status', 'ready', 'resume of a failed fan-out: ready');
SELECT is(pg_temp.attempts('fb_pause'), 'notify#1:failed,notify#2:scheduled', 'resume of a failed fan-out: the step again');
SELECT is(pg_temp.read('fb_pause2', 'fb_pause'), 1, 'setup: attempt 2 begins');
SELECT is(pg_temp.end_step(pg_temp.cur('fb_pause'), 'park', fan_out => pg_temp.jobs('fb_pause', 2)) ->> 'status', 'waiting',
          'attempt 2 parks on a new batch');
SELECT isnt((pg_temp.batch('fb_pause')).batch_id, (pg_temp.att(pg_temp.id('fb_pause_a'))).batch_id, '... a fresh batch, not the first');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE properties ->> 'workflow_id' = pg_temp.run('fb_pause')::text), 2::bigint,
          '... two batches for the run in all');

-- cancel.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fb_cancel', pg_temp.fan('cancel'), 3); END $d$;
SELECT pg_temp.mark('fb_cancel_a', to_jsonb(pg_temp.cur('fb_cancel')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_cancel')).batch_id, 'discarded', 3), true, 'setup: three dead-lettered');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fb_cancel_a')) ->> 'status', 'cancelled', 'on_batch_failure cancel: answers cancelled');
SELECT results_eq($$SELECT status, pause_cause, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('fb_cancel')$$,
                  $$VALUES ('cancelled'::text, NULL::text, true)$$, 'on_batch_failure cancel: the run is cancelled');
SELECT results_eq($$SELECT outcome, error_class, error ->> 'message' FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fb_cancel_a')$$,
                  $$VALUES ('cancel'::text, 'pgbus.workflow.FanOutFailed'::text, '3 of 3 jobs dead-lettered'::text)$$,
                  'on_batch_failure cancel: the attempt ended with cancel and FanOutFailed recorded');
SELECT results_eq($$SELECT event, actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('fb_cancel') AND event = 'cancelled'$$,
                  $$VALUES ('cancelled'::text, 'pgbus'::text, 'fan-out failed'::text)$$, 'on_batch_failure cancel: a cancelled event');

-- skip.
DO $d$ BEGIN PERFORM pg_temp.fan_out('fb_skip', pg_temp.fan('skip'), 3); END $d$;
SELECT pg_temp.mark('fb_skip_a', to_jsonb(pg_temp.cur('fb_skip')));
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_skip')).batch_id, 'completed', 2), false, 'setup: two completed');
SELECT is(pgbus.batch_member_done((pg_temp.batch('fb_skip')).batch_id, 'discarded'), true, 'setup: one dead-lettered');
SELECT is(pgbus.workflow_fan_out_finished(pg_temp.id('fb_skip_a')) ->> 'status', 'ready', 'on_batch_failure skip: answers ready');
SELECT is(pg_temp.attempts('fb_skip') LIKE 'notify#1:%,ship#1:scheduled', true, 'on_batch_failure skip: the run goes on to the next step');
SELECT results_eq($$SELECT outcome, error_class FROM pgbus.workflow_steps WHERE step_id = pg_temp.id('fb_skip_a')$$,
                  $$VALUES ('skip'::text, 'pgbus.workflow.FanOutFailed'::text)$$,
                  'on_batch_failure skip: the attempt ended with skip and FanOutFailed recorded');
SELECT is((pg_temp.att(pg_temp.id('fb_skip_a'))).status, 'failed',
          'on_batch_failure skip: the attempt carries an error, so it is failed (its outcome says skip)');

SELECT * FROM finish();
ROLLBACK;
