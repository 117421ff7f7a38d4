-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_end_step on a run paused or cancelled while its step ran.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(21);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_end_step on a run paused or cancelled while its step ran.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('paused_run', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('paused_run'), 'pause', 'ops', 'look') ->> 'status', 'paused',
          'setup: the run paused while its step ran');
DO $d$ BEGIN PERFORM pg_temp.mark('paused_run_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('paused_run'), 'complete', '{"out": "x"}'),
          '{"ok": true, "status": "paused", "was": "paused", "workflow_class": "t_wfr_paused_run", "step": "a"}'::jsonb,
          'workflow_end_step complete on a paused run: answers ok, paused, and that it was paused before (no event)');
SELECT results_eq($$SELECT status, outcome, output FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('paused_run')$$,
                  $$VALUES ('completed'::text, 'complete'::text, '{"out": "x"}'::jsonb)$$,
                  'workflow_end_step complete on a paused run: the step''s completion is recorded');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('paused_run')$$,
                  $$VALUES ('paused'::text, 'manual'::text)$$, 'workflow_end_step complete on a paused run: the run stays paused');
SELECT is(pg_temp.attempts('paused_run'), 'a#1:completed', 'workflow_end_step complete on a paused run: nothing is scheduled');
SELECT is(pg_temp.has_amsg(pg_temp.cur('paused_run'), 'a'), true, 'workflow_end_step complete on a paused run: the message is archived');
SELECT is(pg_temp.events('paused_run', (pg_temp.marked('paused_run_ev'))::bigint), 'step_completed',
          'workflow_end_step complete on a paused run: only step_completed');

DO $d$ BEGIN PERFORM pg_temp.go('paused_fin', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('paused_fin'), 'pause') ->> 'status', 'paused', 'setup: the run paused while its step ran');
SELECT is(pg_temp.end_step(pg_temp.cur('paused_fin'), 'finished') ->> 'status', 'finished',
          'workflow_end_step finished on a paused run: the run finishes');
SELECT results_eq($$SELECT status, pause_cause, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('paused_fin')$$,
                  $$VALUES ('finished'::text, NULL::text, true)$$, 'workflow_end_step finished on a paused run: finished, no pause cause');

DO $d$ BEGIN PERFORM pg_temp.go('cancelled_run', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('cancelled_run'), 'cancel') ->> 'status', 'cancelled',
          'setup: the run cancelled while its step ran');
DO $d$ BEGIN PERFORM pg_temp.mark('cancelled_run_ev', to_jsonb(pg_temp.last_event_id())); END $d$;
SELECT is(pg_temp.end_step(pg_temp.cur('cancelled_run'), 'complete', '{"out": 1}'),
          '{"ok": false, "code": "not_allowed", "status": "cancelled"}'::jsonb,
          'workflow_end_step on a cancelled run: not_allowed, cancelled');
SELECT results_eq($$SELECT status, outcome, ended_at IS NOT NULL FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('cancelled_run')$$,
                  $$VALUES ('superseded'::text, 'complete'::text, true)$$, 'workflow_end_step on a cancelled run: the attempt is superseded');
SELECT pg_temp.mark('cancelled_run_ended', to_jsonb((pg_temp.w('cancelled_run')).ended_at));
SELECT results_eq($$SELECT status, ended_at FROM pgbus.workflows WHERE workflow_id = pg_temp.run('cancelled_run')$$,
                  $$VALUES ('cancelled'::text, (pg_temp.marked('cancelled_run_ended') #>> '{}')::timestamptz)$$, 'workflow_end_step on a cancelled run: the run stays cancelled');
SELECT is(pg_temp.attempts('cancelled_run'), 'a#1:superseded', 'workflow_end_step on a cancelled run: nothing is scheduled');
SELECT is(pg_temp.has_amsg(pg_temp.cur('cancelled_run'), 'a'), true, 'workflow_end_step on a cancelled run: the message is archived');
SELECT is(pg_temp.events('cancelled_run', (pg_temp.marked('cancelled_run_ev'))::bigint), 'step_completed',
          'workflow_end_step on a cancelled run: records what the step did, no run event');

-- An exception policy's skip said while an operator had paused the run: the attempt failed,
-- but the step is done, so resume goes on after it instead of running it again.
DO $d$ BEGIN PERFORM pg_temp.go('paused_policy_skip', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('paused_policy_skip'), 'pause') ->> 'status', 'paused', 'setup: the run paused while its step ran');
SELECT is(pg_temp.end_step(pg_temp.cur('paused_policy_skip'), 'skip', error => '{"class": "KeyError", "message": "x"}') ->> 'status', 'paused',
          'workflow_end_step skip with an error on a paused run: the run stays paused');
SELECT is(pgbus.workflow_command(pg_temp.run('paused_policy_skip'), 'resume') ->> 'ok', 'true', 'setup: resumed');
SELECT is(pg_temp.attempts('paused_policy_skip'), 'a#1:failed,b#1:scheduled',
          'resume after a policy''s skip on a paused run: the next step is scheduled, the failed one is not run again');

SELECT * FROM finish();
ROLLBACK;
