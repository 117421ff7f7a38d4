-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: run_now, reschedule.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(19);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- run_now, reschedule
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('rn', '[{"name": "a", "wait": 3600}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.read('rn_before', 'rn'), 0, 'setup: the step is not due for an hour');
SELECT pg_temp.mark('rn_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('rn', 'run_now', 'ops', 'hurry'), '{"ok": true, "status": "ready"}'::jsonb, 'run_now: answers ok, ready');
SELECT results_eq(
    $$SELECT pg_temp.recent(s.scheduled_at), (pg_temp.amsg(s.step_id)).vt <= clock_timestamp(), s.attempt, s.status
      FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('rn')$$,
    $$VALUES (true, true, 1, 'scheduled'::text)$$, 'run_now: the same attempt is scheduled now and its message visible now');
SELECT is(pg_temp.events('rn', (pg_temp.marked('rn_ev'))::bigint), 'run_now', 'run_now: a run_now event');
SELECT results_eq($$SELECT actor, reason, details ->> 'step', (details ->> 'scheduled_at')::timestamptz
                    FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rn') AND event = 'run_now'$$,
                  $$VALUES ('ops'::text, 'hurry'::text, 'a'::text, (pg_temp.att(pg_temp.cur('rn'))).scheduled_at)$$,
                  'run_now: the event names the step and the new time');
SELECT is(pg_temp.read('rn', 'rn'), 1, 'run_now: the step is read now');
SELECT is(pg_temp.ctx('rn') ->> 'step_name', 'a', 'run_now: ... step a begins');

DO $d$ BEGIN PERFORM pg_temp.start('rs', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT pg_temp.mark('rs_state', pg_temp.state('rs'));
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', NULL, '{}'),
          '{"ok": false, "code": "invalid", "status": "ready", "message": "reschedule needs a time: {\"at\": \"<ISO 8601 timestamp>\"}"}'::jsonb,
          'reschedule without at: invalid');
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', NULL, '{"at": null}') ->> 'code', 'invalid', 'reschedule with a null at: invalid');
SELECT is(pg_temp.state('rs'), pg_temp.marked('rs_state'), 'reschedule refusals: nothing changed');
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', NULL, '{"at": "not a time"}') - 'message',
          '{"ok": false, "code": "invalid", "status": "ready"}'::jsonb,
          'reschedule with an at that is not a time: a refusal (invalid), not an error');
SELECT is(pg_temp.state('rs'), pg_temp.marked('rs_state'), 'reschedule with an at that is not a time: nothing changed');
SELECT pg_temp.mark('rs_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', 'later', jsonb_build_object('at', now() + interval '2 hours')),
          '{"ok": true, "status": "ready"}'::jsonb, 'reschedule: answers ok, ready');
SELECT results_eq(
    $$SELECT s.scheduled_at, (pg_temp.amsg(s.step_id)).vt, s.attempt FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('rs')$$,
    $$VALUES (now() + interval '2 hours', now() + interval '2 hours', 1)$$,
    'reschedule: the same attempt is scheduled at the time and its message hidden until then');
SELECT is(pg_temp.events('rs', (pg_temp.marked('rs_ev'))::bigint), 'rescheduled', 'reschedule: a rescheduled event');
SELECT results_eq($$SELECT actor, reason, details ->> 'step', (details ->> 'scheduled_at')::timestamptz
                    FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rs') AND event = 'rescheduled'$$,
                  $$VALUES ('ops'::text, 'later'::text, 'a'::text, now() + interval '2 hours')$$,
                  'reschedule: the event names the step and the time');
SELECT is(pg_temp.read('rs_later', 'rs'), 0, 'reschedule: the step is not read before its time');
SELECT is(pg_temp.cmd('rs', 'reschedule', NULL, NULL, jsonb_build_object('at', now() - interval '1 hour')) ->> 'ok', 'true',
          'reschedule to a past time');
SELECT results_eq(
    $$SELECT s.scheduled_at, (pg_temp.amsg(s.step_id)).vt <= clock_timestamp() FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('rs')$$,
    $$VALUES (now() - interval '1 hour', true)$$, 'reschedule to a past time: scheduled then, message visible now');

SELECT * FROM finish();
ROLLBACK;
