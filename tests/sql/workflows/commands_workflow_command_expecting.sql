-- pgTAP tests for pgbus.workflow_command_expecting (sql/functions/400_workflow_command_expecting.sql):
-- the status the caller read and the run's available actions checked under the row lock.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);

SELECT pgbus.workflow_register('t_wce', '[{"name": "one"}, {"name": "two"}]', 'd1', 't_wce');
CREATE TEMP TABLE t_run AS SELECT * FROM pgbus.workflow_start('t_wce', NULL, NULL, '{}', actor => 'tester');
CREATE FUNCTION pg_temp.id() RETURNS uuid LANGUAGE sql AS $f$ SELECT workflow_id FROM t_run $f$;
CREATE FUNCTION pg_temp.events() RETURNS bigint LANGUAGE sql AS $f$
    SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id = pg_temp.id() $f$;
CREATE TEMP TABLE t_n AS SELECT pg_temp.events() AS n;

SELECT is(pgbus.workflow_command_expecting(gen_random_uuid(), 'cancel', 'mcp', 'why'),
          '{"ok": false, "code": "not_found"}'::jsonb, 'an unknown run is not found');
SELECT is(pgbus.workflow_command_expecting(pg_temp.id(), 'cancel', 'mcp', 'why', '{}', 'paused'),
          '{"ok": false, "code": "status_changed", "status": "ready", "expected_status": "paused"}'::jsonb,
          'a run not in the expected status is refused with the status it is in');
SELECT is((SELECT status FROM pgbus.workflows WHERE workflow_id = pg_temp.id()), 'ready', 'and nothing changed');
SELECT is(pg_temp.events(), (SELECT n FROM t_n), 'and nothing was recorded');
SELECT is(pgbus.workflow_command_expecting(pg_temp.id(), 'resume', 'mcp', 'why') - 'available_actions',
          '{"ok": false, "code": "not_allowed", "status": "ready"}'::jsonb,
          'a verb the run does not allow now is refused');
SELECT is(pgbus.workflow_command_expecting(pg_temp.id(), 'resume', 'mcp', 'why') -> 'available_actions',
          to_jsonb(pgbus.workflow_available_actions(pg_temp.id())), 'with the verbs it allows');
SELECT is(pgbus.workflow_command_expecting(pg_temp.id(), 'fly', 'mcp', 'why') ->> 'code', 'invalid',
          'an unknown verb is workflow_command''s invalid');
SELECT is(pg_temp.events(), (SELECT n FROM t_n), 'no refusal recorded anything');
SELECT is(pgbus.workflow_command_expecting(pg_temp.id(), 'pause', 'mcp:agent', 'looking', '{}', 'ready'),
          '{"ok": true, "status": "paused"}'::jsonb, 'the expected status: the verb runs');
SELECT is((SELECT (actor, reason)::text FROM pgbus.workflow_events WHERE workflow_id = pg_temp.id() AND event = 'paused'),
          '(mcp:agent,looking)', 'recorded with its actor and reason');
SELECT is(pgbus.workflow_command_expecting(pg_temp.id(), 'cancel', 'mcp', 'done') ->> 'status', 'cancelled',
          'no expected status: the verb runs');
SELECT throws_ok($$SELECT pgbus.workflow_command_expecting(pg_temp.id(), 'cancel', repeat('a', 300), 'why')$$,
                 '22023', NULL, 'an actor over its limit raises as workflow_command does');

SELECT * FROM finish();
ROLLBACK;
