-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: workflow_stuck (classes t_wfc_st_*),
-- its class filter, and the same rows as its earlier (slower) query.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(22);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_stuck (classes t_wfc_st_*)
-------------------------------------------------------------------------------------------------
-- paused_error: a step failed.
DO $d$ BEGIN PERFORM pg_temp.go('st_error', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('st_error'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused', 'setup: st_error');
-- stalled: paused by the stall action.
DO $d$ BEGIN PERFORM pg_temp.go('st_stall', '[{"name": "a"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfc_st_stall', (pg_temp.att(pg_temp.cur('st_stall'))).msg_id, 0)$$, 'setup: st_stall message back');
SELECT is(pg_temp.read('st_stall_again', 'st_stall'), 1, 'setup: st_stall stalled');
-- stalled: running past its own timeout (60s), well within the threshold.
DO $d$ BEGIN PERFORM pg_temp.go('st_timeout', '[{"name": "a", "timeout": 60}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '2 minutes', scheduled_at = least(scheduled_at, now() - interval '2 minutes') WHERE step_id = pg_temp.cur('st_timeout');
-- stalled: running past the threshold (no timeout).
DO $d$ BEGIN PERFORM pg_temp.go('st_threshold', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes', scheduled_at = least(scheduled_at, now() - interval '20 minutes') WHERE step_id = pg_temp.cur('st_threshold');
-- healthy: running for 5 minutes; running 20 minutes with a timeout of an hour.
DO $d$ BEGIN PERFORM pg_temp.go('st_running_ok', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '5 minutes', scheduled_at = least(scheduled_at, now() - interval '5 minutes') WHERE step_id = pg_temp.cur('st_running_ok');
DO $d$ BEGIN PERFORM pg_temp.go('st_long_timeout', '[{"name": "a", "timeout": 3600}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes', scheduled_at = least(scheduled_at, now() - interval '20 minutes') WHERE step_id = pg_temp.cur('st_long_timeout');
-- paused_manual.
DO $d$ BEGIN PERFORM pg_temp.start('st_manual', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_manual', 'pause'); END $d$;
-- overdue: ready, due 10 minutes ago; healthy: due 2 minutes ago, due now.
DO $d$ BEGIN PERFORM pg_temp.start('st_overdue', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('st_overdue');
DO $d$ BEGIN PERFORM pg_temp.start('st_due', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '2 minutes' WHERE step_id = pg_temp.cur('st_due');
DO $d$ BEGIN PERFORM pg_temp.start('st_ready', '[{"name": "a"}]'); END $d$;
-- healthy: waiting, finished, cancelled.
DO $d$ BEGIN PERFORM pg_temp.start('st_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('st_waiting');
DO $d$ BEGIN PERFORM pg_temp.go('st_finished', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('st_finished'), 'finished') ->> 'status', 'finished', 'setup: st_finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '1 day' WHERE workflow_id = pg_temp.run('st_finished');
DO $d$ BEGIN PERFORM pg_temp.start('st_cancelled', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_cancelled', 'cancel'); END $d$;

SELECT set_eq(
    $$SELECT workflow_id, workflow_class, step_name, reason, error_class FROM pgbus.workflow_stuck()
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES (pg_temp.run('st_error'), 't_wfc_st_error', 'a', 'paused_error', 'app.Boom'),
             (pg_temp.run('st_stall'), 't_wfc_st_stall', 'a', 'stalled', 'pgbus.StepStalled'),
             (pg_temp.run('st_timeout'), 't_wfc_st_timeout', 'a', 'stalled', NULL),
             (pg_temp.run('st_threshold'), 't_wfc_st_threshold', 'a', 'stalled', NULL),
             (pg_temp.run('st_manual'), 't_wfc_st_manual', 'a', 'paused_manual', NULL),
             (pg_temp.run('st_overdue'), 't_wfc_st_overdue', 'a', 'overdue', NULL)$$,
    'workflow_stuck: each stuck run once with its reason (paused_error, stalled x3, paused_manual, overdue); healthy runs not');
SELECT set_eq(
    $$SELECT a.step_id, a.workflow_id, a.run_status, a.reason, a.since
      FROM pgbus.workflow_stuck_attempts(interval '15 minutes', interval '5 minutes', interval '7 days') a
      JOIN pgbus.workflow_steps s USING (step_id) WHERE s.run_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES (pg_temp.cur('st_timeout'), pg_temp.run('st_timeout'), 'running', 'stalled', now() - interval '2 minutes'),
             (pg_temp.cur('st_threshold'), pg_temp.run('st_threshold'), 'running', 'stalled', now() - interval '20 minutes'),
             (pg_temp.cur('st_overdue'), pg_temp.run('st_overdue'), 'ready', 'overdue', now() - interval '10 minutes')$$,
    'workflow_stuck_attempts: the open attempts past their thresholds, each with the run status it implies, why and since when');
SELECT set_eq(
    $$SELECT step_id FROM pgbus.workflow_stuck_attempts(interval '15 minutes', interval '5 minutes', interval '7 days',
                                                        only_class => 't_wfc_st_overdue')$$,
    $$VALUES (pg_temp.cur('st_overdue'))$$,
    'workflow_stuck_attempts(only_class): only that class''s');
SELECT set_eq(
    $$SELECT workflow_id, workflow_class, step_name, reason, error_class
      FROM pgbus.workflow_stuck_at_attempts(interval '15 minutes', interval '5 minutes', interval '7 days')
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$SELECT workflow_id, workflow_class, step_name, reason, error_class FROM pgbus.workflow_stuck()
      WHERE workflow_class LIKE 't\_wfc\_st\_%' AND reason NOT IN ('paused_error', 'paused_manual')
        AND workflow_id <> pg_temp.run('st_stall')$$,
    'workflow_stuck_at_attempts: workflow_stuck''s runs that are not paused (timeout, threshold, overdue)');
SELECT set_eq(
    $$SELECT workflow_id FROM pgbus.workflow_stuck_at_attempts(interval '15 minutes', interval '5 minutes', interval '7 days',
                                                               only_class => 't_wfc_st_overdue')$$,
    $$VALUES (pg_temp.run('st_overdue'))$$,
    'workflow_stuck_at_attempts(only_class): only that class''s');
SELECT results_eq(
    $$SELECT reason, since FROM pgbus.workflow_stuck() WHERE workflow_id IN (pg_temp.run('st_timeout'), pg_temp.run('st_overdue'))
      ORDER BY reason$$,
    $$VALUES ('overdue'::text, now() - interval '10 minutes'), ('stalled', now() - interval '2 minutes')$$,
    'workflow_stuck: since is when the step started (stalled) or was due (overdue)');
SELECT is((SELECT since FROM pgbus.workflow_stuck() WHERE workflow_id = pg_temp.run('st_manual')), (pg_temp.w('st_manual')).updated_at,
          'workflow_stuck: since is when a paused run was last updated');
SELECT set_eq(
    $$SELECT workflow_class, reason FROM pgbus.workflow_stuck(interval '30 minutes', interval '15 minutes')
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES ('t_wfc_st_error', 'paused_error'), ('t_wfc_st_stall', 'stalled'), ('t_wfc_st_timeout', 'stalled'),
             ('t_wfc_st_manual', 'paused_manual')$$,
    'workflow_stuck: a longer threshold and overdue_after leave out the 20-minute step and the 10-minute-late one (own timeout still counts)');
SELECT set_eq(
    $$SELECT workflow_class, reason FROM pgbus.workflow_stuck(interval '4 minutes', interval '1 minute')
      WHERE workflow_class LIKE 't\_wfc\_st\_%' AND reason IN ('stalled', 'overdue')$$,
    $$VALUES ('t_wfc_st_stall', 'stalled'), ('t_wfc_st_timeout', 'stalled'), ('t_wfc_st_threshold', 'stalled'),
             ('t_wfc_st_running_ok', 'stalled'), ('t_wfc_st_overdue', 'overdue'), ('t_wfc_st_due', 'overdue')$$,
    'workflow_stuck: a shorter threshold and overdue_after take in the 5-minute step and the 2-minute-late one');


-- More shapes for the comparisons below: paused by an operator while its step ran for 20
-- minutes (paused_manual, not stalled); waiting for 8 days (waiting_overdue); overdue with an
-- attempt written before attempts carried their run's class (run_class NULL).
DO $d$ BEGIN PERFORM pg_temp.go('st_pause_running', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_pause_running', 'pause'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes', scheduled_at = least(scheduled_at, now() - interval '20 minutes') WHERE step_id = pg_temp.cur('st_pause_running');
DO $d$ BEGIN PERFORM pg_temp.start('st_wait_long', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET status = 'waiting', waiting_since = now() - interval '8 days', scheduled_at = now() - interval '8 days' WHERE step_id = pg_temp.cur('st_wait_long');
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('st_wait_long');
DO $d$ BEGIN PERFORM pg_temp.start('st_legacy', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes', run_class = NULL WHERE step_id = pg_temp.cur('st_legacy');
SELECT is((SELECT string_agg(reason, ',' ORDER BY workflow_class) FROM pgbus.workflow_stuck()
           WHERE workflow_class IN ('t_wfc_st_pause_running', 't_wfc_st_wait_long', 't_wfc_st_legacy')),
          'overdue,paused_manual,waiting_overdue', 'workflow_stuck: paused while running, waiting 8 days, an attempt without run_class');

-- The query before the class filter and the ongoing-runs look-up (workflows_ongoing_id_idx), kept
-- here to show that the current one answers exactly the same rows.
CREATE FUNCTION pg_temp.stuck_before(stall_threshold interval DEFAULT interval '15 minutes',
                                     overdue_after interval DEFAULT interval '5 minutes',
                                     waiting_threshold interval DEFAULT interval '7 days')
RETURNS TABLE (workflow_id uuid, workflow_class text, step_name text, reason text, error_class text, since timestamptz)
LANGUAGE sql STABLE AS $f$
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE w.pause_cause WHEN 'error' THEN 'paused_error' WHEN 'stall' THEN 'stalled'
                              ELSE 'paused_manual' END,
           w.error_class, w.updated_at
    FROM pgbus.workflows w
    WHERE w.pause_cause IS NOT NULL AND w.ended_at IS NULL
    UNION ALL
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE w.status WHEN 'running' THEN 'stalled' WHEN 'waiting' THEN 'waiting_overdue'
                         ELSE 'overdue' END,
           s.error_class,
           CASE w.status WHEN 'running' THEN s.started_at WHEN 'waiting' THEN s.waiting_since
                         ELSE s.scheduled_at END
    FROM (SELECT o.* FROM pgbus.workflow_steps o
          WHERE o.ended_at IS NULL
            AND o.scheduled_at < now() - least(stall_threshold, overdue_after, waiting_threshold)
          UNION ALL
          SELECT o.* FROM pgbus.workflow_steps o
          WHERE o.ended_at IS NULL AND o.timeout IS NOT NULL
            AND o.scheduled_at >= now() - least(stall_threshold, overdue_after, waiting_threshold)) s
    JOIN pgbus.workflows w ON w.workflow_id = s.workflow_id AND w.current_step_id = s.step_id
    WHERE w.ended_at IS NULL AND w.pause_cause IS NULL
      AND ((w.status = 'running' AND s.status = 'running'
            AND s.started_at < now() - coalesce(s.timeout, stall_threshold))
           OR (w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - overdue_after)
           OR (w.status = 'waiting' AND s.status = 'waiting' AND s.waiting_since < now() - waiting_threshold))
$f$;
SELECT cmp_ok((SELECT count(*)::int FROM pg_temp.stuck_before() WHERE workflow_class LIKE 't\_wfc\_st\_%'), '>=', 9,
              'the comparisons below see every reason (at least 9 stuck runs of these classes)');
SELECT set_eq($$SELECT * FROM pgbus.workflow_stuck()$$, $$SELECT * FROM pg_temp.stuck_before()$$,
              'workflow_stuck: the same rows as before (default thresholds)');
SELECT set_eq($$SELECT * FROM pgbus.workflow_stuck(interval '30 minutes', interval '15 minutes')$$,
              $$SELECT * FROM pg_temp.stuck_before(interval '30 minutes', interval '15 minutes')$$,
              'workflow_stuck: the same rows as before (longer thresholds)');
SELECT set_eq($$SELECT * FROM pgbus.workflow_stuck(interval '4 minutes', interval '1 minute', interval '1 day')$$,
              $$SELECT * FROM pg_temp.stuck_before(interval '4 minutes', interval '1 minute', interval '1 day')$$,
              'workflow_stuck: the same rows as before (shorter thresholds)');
-- only_class: each class's rows of the unfiltered answer, no more, no fewer.
SELECT set_eq(
    $$SELECT k.* FROM (SELECT DISTINCT w.workflow_class FROM pgbus.workflows w WHERE w.workflow_class LIKE 't\_wfc\_st\_%') c,
             LATERAL pgbus.workflow_stuck(interval '4 minutes', interval '1 minute', interval '1 day', only_class => c.workflow_class) k$$,
    $$SELECT * FROM pg_temp.stuck_before(interval '4 minutes', interval '1 minute', interval '1 day') WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    'workflow_stuck(only_class): each class answers its own rows of the whole answer');
SELECT is((SELECT reason FROM pgbus.workflow_stuck(only_class => 't_wfc_st_legacy')), 'overdue',
          'workflow_stuck(only_class): an attempt without run_class is still found');
SELECT is_empty($$SELECT * FROM pgbus.workflow_stuck(only_class => 't_wfc_st_nobody')$$,
                'workflow_stuck(only_class): an unknown class has no stuck runs');
SELECT has_index('pgbus', 'workflows', 'workflows_ongoing_id_idx', ARRAY['workflow_id'],
                 'workflows_ongoing_id_idx: ongoing runs by id, for the run look-ups');

SELECT * FROM finish();
ROLLBACK;
