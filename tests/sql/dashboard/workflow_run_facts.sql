-- pgTAP tests for sql/functions/301_workflow_run_facts.sql (the run's error class kept by its
-- triggers, migration 0015) and for pgbus.workflow_stuck reading it: the set-based query gives
-- the same answer as the per-run classification it replaced (classes t_wfc_rf_*).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(14);
\ir ../include/workflow_commands_setup.psql

-- An attempt fails and the run pauses: the run carries the error class.
DO $d$ BEGIN PERFORM pg_temp.go('rf_fail', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('rf_fail'), 'pause', error => '{"class": "app.Boom", "message": "no"}') ->> 'status',
          'paused', 'setup: rf_fail paused on an error');
SELECT is((pg_temp.w('rf_fail')).error_class, 'app.Boom', 'error class: a failed attempt puts its error class on the run');
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list(only_error_class => 'app.Boom')), ARRAY[pg_temp.run('rf_fail')],
          'error class: the list filter finds the run by it');
-- Resumed: the new attempt has none, and neither has the run.
SELECT is(pg_temp.cmd('rf_fail', 'resume') ->> 'ok', 'true', 'setup: rf_fail resumed');
SELECT is((pg_temp.w('rf_fail')).error_class, NULL, 'error class: cleared when the run moves on to a new attempt');

-- Failed, then cancelled: the current attempt is still the failed one, so is the error class.
DO $d$ BEGIN PERFORM pg_temp.go('rf_gone', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('rf_gone'), 'pause', error => '{"class": "app.Gone"}') ->> 'status', 'paused', 'setup: rf_gone paused');
SELECT is(pg_temp.cmd('rf_gone', 'cancel') ->> 'ok', 'true', 'setup: rf_gone cancelled');
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list('all', only_error_class => 'app.Gone')), ARRAY[pg_temp.run('rf_gone')],
          'error class: a cancelled run keeps its failed attempt''s');

-- Paused by an operator while its attempt runs, then the attempt is found stalled: the run
-- stays paused (manual) and takes the stall's error class.
DO $d$ BEGIN PERFORM pg_temp.go('rf_manual', '[{"name": "a"}]'); PERFORM pg_temp.cmd('rf_manual', 'pause'); END $d$;
SELECT is(pgbus.workflow_stall(pg_temp.w('rf_manual'), pg_temp.att(pg_temp.cur('rf_manual')), 'sweep', 'pause'), 'paused',
          'setup: rf_manual stalled while paused');
SELECT is((pg_temp.w('rf_manual')).error_class, 'pgbus.StepStalled', 'error class: a stall while paused reaches the run');

-- Cancelled while its attempt runs, then the attempt ends in a failure: the ended run is left
-- as it ended, its error class too.
DO $d$ BEGIN PERFORM pg_temp.go('rf_late', '[{"name": "a"}]'); PERFORM pg_temp.cmd('rf_late', 'cancel'); END $d$;
CREATE TEMP TABLE t_late AS SELECT * FROM pgbus.workflows WHERE workflow_id = pg_temp.run('rf_late');
SELECT lives_ok($$SELECT pgbus.workflow_end_step(pg_temp.cur('rf_late'), 'pause', error => '{"class": "app.Late"}')$$,
                'setup: rf_late''s attempt ends late in a failure');
SELECT is((SELECT to_jsonb(w) FROM pgbus.workflows w WHERE workflow_id = pg_temp.run('rf_late')),
          (SELECT to_jsonb(t) FROM t_late t), 'error class: an ended run does not change when an attempt ends late');

-- More stuck and healthy runs: running past a timeout of its own (due and begun 2 minutes
-- ago), past the threshold, overdue, due in the future, waiting.
DO $d$ BEGIN PERFORM pg_temp.go('rf_timeout', '[{"name": "a", "timeout": 60}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '2 minutes', scheduled_at = now() - interval '2 minutes'
WHERE step_id = pg_temp.cur('rf_timeout');
DO $d$ BEGIN PERFORM pg_temp.go('rf_threshold', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes', scheduled_at = now() - interval '21 minutes'
WHERE step_id = pg_temp.cur('rf_threshold');
DO $d$ BEGIN PERFORM pg_temp.start('rf_overdue', '[{"name": "a"}]'); PERFORM pg_temp.start('rf_later', '[{"name": "a", "wait": 3600}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('rf_overdue');

-- Every ongoing run's error class is its current attempt's.
SELECT is_empty($$SELECT w.workflow_id FROM pgbus.workflows w LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
                 WHERE w.ended_at IS NULL AND w.error_class IS DISTINCT FROM s.error_class$$,
                'error class: every ongoing run''s is its current attempt''s');
-- The classification per run (the definition before it was made set-based) gives the same rows.
SELECT set_eq(
    $$SELECT * FROM pgbus.workflow_stuck()$$,
    $$SELECT w.workflow_id, w.workflow_class, w.current_step,
             CASE WHEN w.status = 'paused' AND w.pause_cause = 'error' THEN 'paused_error'
                  WHEN w.status = 'paused' AND w.pause_cause = 'stall' THEN 'stalled'
                  WHEN w.status = 'paused' THEN 'paused_manual'
                  WHEN w.status = 'running' THEN 'stalled'
                  WHEN w.status = 'waiting' THEN 'waiting_overdue'
                  ELSE 'overdue' END,
             s.error_class,
             CASE WHEN w.status = 'paused' THEN w.updated_at WHEN w.status = 'running' THEN s.started_at
                  WHEN w.status = 'waiting' THEN s.waiting_since ELSE s.scheduled_at END
      FROM pgbus.workflows w LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.ended_at IS NULL
        AND (w.status = 'paused'
             OR (w.status = 'running' AND s.status = 'running' AND s.started_at < now() - coalesce(s.timeout, interval '15 minutes'))
             OR (w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - interval '5 minutes')
             OR (w.status = 'waiting' AND s.status = 'waiting' AND s.waiting_since < now() - interval '7 days'))$$,
    'workflow_stuck: the same runs, reasons, error classes and times as the per-run classification');

SELECT * FROM finish();
ROLLBACK;
