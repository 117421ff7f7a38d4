-- pgTAP tests for sql/functions/200_recurring.sql and the view pgbus.recurring_task_list:
-- recurring_sync, recurring_fire (the claim per (task_key, run_at) with its enqueue),
-- recurring_claimed, recurring_note_next_runs, recurring_run_now, recurring_set_enabled,
-- recurring_executions_of, cleanup_recurring_executions, scheduler_enqueue.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(64);

DELETE FROM pgbus.recurring_executions;
DELETE FROM pgbus.recurring_tasks;

-- A declaration of one task as the scheduler writes it.
CREATE FUNCTION pg_temp.decl(key text, schedule text DEFAULT '*/5 * * * *', enabled boolean DEFAULT true,
                             queue text DEFAULT 't_rec_q', zone text DEFAULT 'UTC') RETURNS jsonb
LANGUAGE sql AS $f$
    SELECT jsonb_build_object('key', key, 'target', 'job', 'class_name', 'app.jobs:' || key,
                              'arguments', jsonb_build_object('args', jsonb_build_array(key), 'kwargs', '{}'::jsonb),
                              'schedule', schedule, 'human_schedule', 'words ' || schedule,
                              'time_zone', zone, 'queue_name', queue, 'enabled', enabled)
$f$;
CREATE FUNCTION pg_temp.task(key text) RETURNS pgbus.recurring_tasks LANGUAGE sql AS $f$
    SELECT * FROM pgbus.recurring_tasks WHERE recurring_tasks.key = $1
$f$;
CREATE FUNCTION pg_temp.queued(queue text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE n bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = queue) THEN RETURN 0; END IF;
    EXECUTE format('SELECT count(*) FROM pgmq.q_%s', queue) INTO n;
    RETURN n;
END $f$;

SELECT has_table('pgbus', 'recurring_tasks', 'pgbus.recurring_tasks exists');
SELECT has_table('pgbus', 'recurring_executions', 'pgbus.recurring_executions exists');
SELECT has_pk('pgbus', 'recurring_executions', 'recurring_executions: the primary key (task_key, run_at) is the claim');
SELECT has_view('pgbus', 'recurring_task_list', 'pgbus.recurring_task_list exists');

-------------------------------------------------------------------------------------------------
-- recurring_sync
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('alpha'), pg_temp.decl('beta'))),
          '{"added": 2, "changed": 0, "removed": 0}'::jsonb, 'sync: two new tasks are added');
SELECT results_eq(
    $$SELECT key, class_name, schedule, human_schedule, time_zone, queue_name, enabled, static, schedule_from
      FROM pgbus.recurring_tasks ORDER BY key$$,
    $$VALUES ('alpha'::text, 'app.jobs:alpha'::text, '*/5 * * * *'::text, 'words */5 * * * *'::text, 'UTC'::text, 't_rec_q'::text, true, true, now()),
             ('beta', 'app.jobs:beta', '*/5 * * * *', 'words */5 * * * *', 'UTC', 't_rec_q', true, true, now())$$,
    'sync: stores the declarations; their schedules start now');
SELECT is(pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('alpha'), pg_temp.decl('beta'))),
          '{"added": 0, "changed": 0, "removed": 0}'::jsonb, 'sync: the same declarations change nothing');

-- A task disabled from the dashboard stays disabled when the same declaration is synced again.
UPDATE pgbus.recurring_tasks SET schedule_from = now() - interval '1 hour' WHERE key IN ('alpha', 'beta');
SELECT is((pgbus.recurring_set_enabled('beta', false)) ->> 'ok', 'true', 'set_enabled: disables beta');
SELECT pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('alpha'), pg_temp.decl('beta')));
SELECT is((pg_temp.task('beta')).enabled, false, 'sync: a dashboard toggle survives a sync of the same declaration');
SELECT is(pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('alpha'), pg_temp.decl('beta', enabled => false))) ->> 'changed',
          '1', 'sync: a declaration that now says enabled: false is a change');
SELECT is(pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('alpha'), pg_temp.decl('beta', enabled => true))) ->> 'changed',
          '1', 'sync: and back to enabled: true');
SELECT is((pg_temp.task('beta')).enabled, true, 'sync: a declaration that changes enabled wins over the toggle');
SELECT is((pg_temp.task('beta')).schedule_from, now(), 'sync: re-enabled by its declaration, its schedule starts again now');
SELECT is((pg_temp.task('alpha')).schedule_from, now() - interval '1 hour', 'sync: an unchanged task keeps its schedule start');

-- A changed schedule starts now; an undeclared task is removed.
SELECT is(pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('alpha', '0 * * * *'))),
          '{"added": 0, "changed": 1, "removed": 1}'::jsonb, 'sync: a changed schedule is a change; beta is removed');
SELECT is((pg_temp.task('alpha')).schedule_from, now(), 'sync: a changed schedule starts now');
SELECT is((SELECT count(*)::integer FROM pgbus.recurring_tasks WHERE key = 'beta'), 0, 'sync: beta is gone');

-- Bad declarations are refused whole: nothing changes.
SELECT throws_ok($$SELECT pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('gamma'), pg_temp.decl('gamma')))$$,
                 '23505', 'pgbus: recurring task gamma is declared twice', 'sync: a key declared twice is refused');
SELECT throws_ok($$SELECT pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('gamma'), pg_temp.decl('delta', zone => 'Mars/Olympus')))$$,
                 '22023', NULL, 'sync: an unknown time zone is refused');
SELECT throws_ok($$SELECT pgbus.recurring_sync(jsonb_build_array(pg_temp.decl('gamma'), pg_temp.decl('bad key!')))$$,
                 '23514', NULL, 'sync: a key the table refuses fails the whole sync');
SELECT throws_ok($$SELECT pgbus.recurring_sync('{"key": "x"}')$$, '22023', NULL, 'sync: not an array is refused');
SELECT results_eq($$SELECT key, schedule FROM pgbus.recurring_tasks$$, $$VALUES ('alpha'::text, '0 * * * *'::text)$$,
                  'sync: after the refusals the tasks are as they were (nothing half-applied)');

-------------------------------------------------------------------------------------------------
-- recurring_fire: the claim and the enqueue
-------------------------------------------------------------------------------------------------
UPDATE pgbus.recurring_tasks SET schedule_from = now() - interval '3 hours' WHERE key = 'alpha';
CREATE TEMP TABLE t_fire AS
    SELECT pgbus.recurring_fire('alpha', date_trunc('hour', now()) - interval '1 hour') AS r;
SELECT is((SELECT r ->> 'ok' FROM t_fire), 'true', 'fire: the first call for a tick fires it');
SELECT is(pg_temp.queued('t_rec_q'), 1::bigint, 'fire: one message is in the task''s queue');
SELECT results_eq(
    $$SELECT message ->> 'job_class', message -> 'args' FROM pgmq.q_t_rec_q$$,
    $$VALUES ('app.jobs:alpha'::text, '["alpha"]'::jsonb)$$,
    'fire: the message names the task''s class and carries its arguments');
SELECT results_eq(
    $$SELECT task_key, run_at, manual, msg_id FROM pgbus.recurring_executions$$,
    $$SELECT 'alpha'::text, date_trunc('hour', now()) - interval '1 hour', false, (SELECT msg_id FROM pgmq.q_t_rec_q)$$,
    'fire: the execution row holds the tick and the message id');
SELECT is((pg_temp.task('alpha')).last_run_at, date_trunc('hour', now()) - interval '1 hour', 'fire: last_run_at is the tick');
SELECT is(pgbus.recurring_fire('alpha', date_trunc('hour', now()) - interval '1 hour') ->> 'code', 'already_fired',
          'fire: the same tick again answers already_fired');
SELECT is(pg_temp.queued('t_rec_q'), 1::bigint, 'fire: and sends nothing');
SELECT is(pgbus.recurring_fire('alpha', date_trunc('hour', now()) - interval '2 hours') ->> 'ok', 'true',
          'fire: an earlier unclaimed tick (a catch-up) fires');
SELECT is((pg_temp.task('alpha')).last_run_at, date_trunc('hour', now()) - interval '1 hour',
          'fire: last_run_at never goes back');
SELECT is(pgbus.recurring_fire('alpha', now() - interval '4 hours') ->> 'code', 'before_schedule',
          'fire: a tick before the schedule started is refused');
SELECT is(pgbus.recurring_fire('alpha', clock_timestamp() + interval '1 minute') ->> 'code', 'in_future',
          'fire: a tick in the future is refused');
SELECT is(pgbus.recurring_fire('nobody', now()) ->> 'code', 'not_found', 'fire: an unknown task is refused');
SELECT pgbus.recurring_set_enabled('alpha', false);
SELECT is(pgbus.recurring_fire('alpha', now() - interval '1 minute') ->> 'code', 'disabled', 'fire: a disabled task is refused');
SELECT is(pg_temp.queued('t_rec_q'), 2::bigint, 'fire: the refusals sent nothing');

-------------------------------------------------------------------------------------------------
-- recurring_set_enabled
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.recurring_set_enabled('alpha', true), '{"ok": true, "task_key": "alpha", "enabled": true, "changed": true}'::jsonb,
          'set_enabled: enables');
SELECT is((pg_temp.task('alpha')).schedule_from, now(), 'set_enabled: an enabled task''s schedule starts now (no catch-up of the disabled time)');
SELECT is(pgbus.recurring_set_enabled('alpha', true) ->> 'changed', 'false', 'set_enabled: enabling an enabled task changes nothing');
SELECT is(pgbus.recurring_set_enabled('nobody', true) ->> 'code', 'not_found', 'set_enabled: an unknown task is refused');
SELECT is(pgbus.recurring_set_enabled('alpha', NULL) ->> 'code', 'invalid', 'set_enabled: NULL is refused');

-------------------------------------------------------------------------------------------------
-- recurring_claimed, note_next_runs, run_now, executions_of, the list view
-------------------------------------------------------------------------------------------------
SELECT results_eq(
    $$SELECT pgbus.recurring_claimed('alpha', now() - interval '5 hours', now())$$,
    $$VALUES (date_trunc('hour', now()) - interval '2 hours'), (date_trunc('hour', now()) - interval '1 hour')$$,
    'claimed: the claimed ticks in the range, oldest first');
SELECT is((SELECT count(*)::integer FROM pgbus.recurring_claimed('alpha', date_trunc('hour', now()) - interval '90 minutes', now())), 1,
          'claimed: only those in the range');
SELECT is(pgbus.recurring_note_next_runs('{"alpha": "2030-01-01T00:00:00Z", "nobody": "2030-01-01T00:00:00Z"}'), 1,
          'note_next_runs: updates the known task');
SELECT is(pgbus.recurring_note_next_runs('{"alpha": "2030-01-01T00:00:00Z"}'), 0, 'note_next_runs: an unchanged time writes nothing');
SELECT is((pg_temp.task('alpha')).next_run_at, '2030-01-01T00:00:00Z'::timestamptz, 'note_next_runs: stores the next run');

CREATE TEMP TABLE t_now AS SELECT pgbus.recurring_run_now('alpha') AS r;
SELECT is((SELECT r ->> 'manual' FROM t_now), 'true', 'run_now: enqueues a manual execution');
SELECT is(pg_temp.queued('t_rec_q'), 3::bigint, 'run_now: one more message');
SELECT is((SELECT count(*)::integer FROM pgbus.recurring_claimed('alpha', now() - interval '5 hours', clock_timestamp())), 2,
          'run_now: a manual execution is not a claimed tick');
SELECT is(pgbus.recurring_run_now('nobody') ->> 'code', 'not_found', 'run_now: an unknown task is refused');
SELECT results_eq(
    $$SELECT manual FROM pgbus.recurring_executions_of('alpha')$$,
    $$VALUES (true), (false), (false)$$,
    'executions_of: newest first');
SELECT is((SELECT count(*)::integer FROM pgbus.recurring_executions_of('alpha', 2)), 2, 'executions_of: at most max_rows');
SELECT results_eq(
    $$SELECT key, human_schedule, enabled, next_run_at FROM pgbus.recurring_task_list$$,
    $$VALUES ('alpha'::text, 'words 0 * * * *'::text, true, '2030-01-01T00:00:00Z'::timestamptz)$$,
    'recurring_task_list: the task, its schedule in words and next run');
SELECT pgbus.recurring_set_enabled('alpha', false);
SELECT is((SELECT next_run_at FROM pgbus.recurring_task_list WHERE key = 'alpha'), NULL,
          'recurring_task_list: a disabled task has no next run');

-------------------------------------------------------------------------------------------------
-- A workflow target starts a run (idempotent per tick)
-------------------------------------------------------------------------------------------------
SELECT pgbus.workflow_register('t_rec_wf', '[{"name": "only"}]', 'd1', 't_rec_wfq');
SELECT pgbus.recurring_sync(jsonb_build_array(
    pg_temp.decl('alpha', '0 * * * *'),
    jsonb_build_object('key', 'flow', 'target', 'workflow', 'class_name', 't_rec_wf', 'arguments', '{"n": 1}'::jsonb,
                       'schedule', 'every 1h', 'time_zone', 'UTC')));
UPDATE pgbus.recurring_tasks SET schedule_from = now() - interval '3 hours' WHERE key = 'flow';
CREATE TEMP TABLE t_flow AS SELECT pgbus.recurring_fire('flow', date_trunc('hour', now())) AS r;
SELECT isnt((SELECT r ->> 'workflow_id' FROM t_flow), NULL, 'fire: a workflow task starts a run');
SELECT results_eq(
    $$SELECT workflow_class, arguments, idempotency_key FROM pgbus.workflows WHERE workflow_id = (SELECT (r ->> 'workflow_id')::uuid FROM t_flow)$$,
    $$SELECT 't_rec_wf'::text, '{"n": 1}'::jsonb,
             'recurring:flow@' || to_char(date_trunc('hour', now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')$$,
    'fire: the run has the task''s arguments and an idempotency key of the tick');

-------------------------------------------------------------------------------------------------
-- cleanup_recurring_executions
-------------------------------------------------------------------------------------------------
UPDATE pgbus.recurring_executions SET run_at = run_at - interval '8 days' WHERE NOT manual AND task_key = 'alpha';
SELECT is(pgbus.cleanup_recurring_executions(), 2, 'cleanup: removes the executions over 7 days old');
SELECT is(pgbus.cleanup_recurring_executions(), 0, 'cleanup: nothing more');
SELECT is(pgbus.cleanup_recurring_executions(interval '0'), 1, 'cleanup: the retention sets the threshold (the tick of this hour goes)');

-------------------------------------------------------------------------------------------------
-- recurring_overview (MCP pgbus_recurring)
-------------------------------------------------------------------------------------------------
SELECT is(jsonb_array_length(pgbus.recurring_overview() -> 'recurring_tasks'), 2, 'overview: every task without paging');
SELECT is((pgbus.recurring_overview() -> 'recurring_tasks' -> 0 ->> 'key'), 'alpha', 'overview: ordered by key');
SELECT is(pgbus.recurring_overview(1, 1) - 'recurring_tasks', '{"total": 2, "has_more": true}'::jsonb, 'overview: page 1 of 1 row has more');
SELECT is((pgbus.recurring_overview(2, 1) -> 'recurring_tasks' -> 0 ->> 'key'), 'flow', 'overview: page 2');
SELECT is(pgbus.recurring_overview(2, 1) ->> 'has_more', 'false', 'overview: the last page has no more');

SELECT * FROM finish();
ROLLBACK;
