-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: resume_at.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(11);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- resume_at
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('ra', '[{"name": "a"}, {"name": "b"}, {"name": "g", "removed": true}, {"name": "c"}]'); END $d$;
INSERT INTO t_runs SELECT 'ra', s.* FROM pgbus.workflow_start('t_wfc_ra') s;
DO $d$ BEGIN PERFORM pg_temp.read('ra', 'ra'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('ra'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused', 'setup: a failed');
SELECT pg_temp.mark('ra_state', pg_temp.state('ra'));
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', NULL, '{"step": "zzz"}'),
          '{"ok": false, "code": "invalid", "status": "paused", "message": "t_wfc_ra has no step ''zzz''"}'::jsonb,
          'resume_at an unknown step: invalid');
SELECT is(pg_temp.state('ra'), pg_temp.marked('ra_state'), 'resume_at an unknown step: nothing changed');
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', NULL, '{}'),
          '{"ok": false, "code": "invalid", "status": "paused", "message": "t_wfc_ra has no step NULL"}'::jsonb,
          'resume_at without a step: invalid');
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', NULL, '{"step": "g"}') ->> 'code', 'invalid', 'resume_at a gravestone step: invalid');
SELECT is(pg_temp.state('ra'), pg_temp.marked('ra_state'), 'resume_at refusals: nothing changed');
SELECT pg_temp.mark('ra_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', 'skip b', '{"step": "c"}'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume_at a named step: answers ok, ready');
SELECT is(pg_temp.attempts('ra'), 'a#1:failed,c#1:scheduled', 'resume_at a named step: that step is scheduled');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, w.current_step, pg_temp.recent(s.scheduled_at), pg_temp.has_amsg(s.step_id)
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('ra')$$,
    $$VALUES ('ready'::text, NULL::text, 'c'::text, true, true)$$,
    'resume_at a named step: the run is ready at it, scheduled now, with its message');
SELECT is(pg_temp.events('ra', (pg_temp.marked('ra_ev'))::bigint), 'resumed_at,step_scheduled', 'resume_at: events resumed_at, step_scheduled');
SELECT results_eq($$SELECT actor, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('ra') AND event = 'resumed_at'$$,
                  $$VALUES ('ops'::text, 'skip b'::text, '{"step": "c"}'::jsonb)$$, 'resume_at: the event names the step, actor and reason');

SELECT * FROM finish();
ROLLBACK;
