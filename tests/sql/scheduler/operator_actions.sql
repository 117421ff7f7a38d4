-- pgTAP tests for sql/functions/210_scheduler_operator_actions.sql: recurring_task_toggle,
-- recurring_task_run_now, deploy_task_toggle, deploy_task_run_now_by (answers and audit rows).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(16);

DELETE FROM pgbus.recurring_tasks;
DELETE FROM pgbus.deploy_tasks;
DELETE FROM pgbus.deploy_task_runs;
DELETE FROM pgbus.processes;
DELETE FROM pgbus.operator_actions;
SELECT pgbus.recurring_sync('[{"key": "nightly", "class_name": "app:Job", "schedule": "0 3 * * *", "queue_name": "t_ops_q"}]');
SELECT pgbus.deploy_tasks_declare('[{"key": "backfill", "class_name": "app:Fix", "version": "2", "queue_name": "t_ops_q"}]');
SELECT pgbus.process_register('worker', 'h', 1, 'R9');

SELECT is(pgbus.recurring_task_toggle('nightly', false, 'dashboard:ann') - 'task_key' - 'enabled' - 'changed',
          '{"ok": true, "code": "disabled", "message": "Recurring task nightly disabled: it fires no more ticks until enabled"}'::jsonb,
          'recurring_task_toggle: disables, in words');
SELECT is((SELECT enabled FROM pgbus.recurring_tasks), false, 'recurring_task_toggle: the task is disabled');
SELECT is(pgbus.recurring_task_toggle('nightly', false, 'dashboard:ann') ->> 'code', 'unchanged', 'recurring_task_toggle: again: unchanged');
SELECT is(pgbus.recurring_task_toggle('nightly', true, 'dashboard:ann') ->> 'code', 'enabled', 'recurring_task_toggle: enables');
SELECT is(pgbus.recurring_task_toggle('nobody', true, 'dashboard:ann') - 'task_key',
          '{"ok": false, "code": "not_found", "message": "Not done: there is no recurring task nobody"}'::jsonb,
          'recurring_task_toggle: an unknown task is refused in words');
SELECT matches(pgbus.recurring_task_run_now('nightly', 'dashboard:ann') ->> 'message',
               '^Recurring task nightly enqueued now \(message [0-9]+ in t_ops_q\)$', 'recurring_task_run_now: enqueues, in words');
SELECT is(pgbus.recurring_task_run_now('nobody', 'dashboard:ann') ->> 'code', 'not_found', 'recurring_task_run_now: an unknown task is refused');
SELECT throws_ok($$SELECT pgbus.recurring_task_run_now('nightly', NULL)$$, '22023', NULL, 'recurring_task_run_now: needs an actor');

SELECT is(pgbus.deploy_task_toggle('backfill', false, 'mcp:bot') ->> 'code', 'disabled', 'deploy_task_toggle: disables');
SELECT is(pgbus.deploy_task_toggle('backfill', true, 'mcp:bot') ->> 'message',
          'Deploy task backfill enabled: the scheduler enqueues it once the fleet has rolled over', 'deploy_task_toggle: enables, in words');
SELECT is(pgbus.deploy_task_toggle('nobody', true, 'mcp:bot') ->> 'code', 'not_found', 'deploy_task_toggle: an unknown task is refused');
CREATE TEMP TABLE t_run AS SELECT pgbus.deploy_task_run_now_by('backfill', 'dashboard:ann') AS r;
SELECT matches((SELECT r ->> 'message' FROM t_run), '^Deploy task backfill enqueued now \(message [0-9]+ in t_ops_q\)$',
               'deploy_task_run_now_by: enqueues, in words');
SELECT results_eq($$SELECT arm, manual, app_revision FROM pgbus.deploy_task_runs$$,
                  $$VALUES ('manual'::text, true, 'R9'::text)$$,
                  'deploy_task_run_now_by: a manual run stamped with the fleet''s revision');
SELECT is(pgbus.deploy_task_run_now_by('nobody', 'dashboard:ann') ->> 'code', 'not_found', 'deploy_task_run_now_by: an unknown task is refused');

SELECT results_eq(
    $$SELECT actor, action, outcome ->> 'code' FROM pgbus.operator_actions ORDER BY id$$,
    $$VALUES ('dashboard:ann'::text, 'recurring_task_disable'::text, 'disabled'::text),
             ('dashboard:ann', 'recurring_task_disable', 'unchanged'),
             ('dashboard:ann', 'recurring_task_enable', 'enabled'),
             ('dashboard:ann', 'recurring_task_enable', 'not_found'),
             ('dashboard:ann', 'recurring_task_run_now', 'enqueued'),
             ('dashboard:ann', 'recurring_task_run_now', 'not_found'),
             ('mcp:bot', 'deploy_task_disable', 'disabled'),
             ('mcp:bot', 'deploy_task_enable', 'enabled'),
             ('mcp:bot', 'deploy_task_enable', 'not_found'),
             ('dashboard:ann', 'deploy_task_run_now', 'enqueued'),
             ('dashboard:ann', 'deploy_task_run_now', 'not_found')$$,
    'every call, refused or not, is recorded with its actor and answer');
SELECT is((SELECT target FROM pgbus.operator_actions ORDER BY id LIMIT 1), '{"task_key": "nightly"}'::jsonb,
          'the audit row names the task');

SELECT * FROM finish();
ROLLBACK;
