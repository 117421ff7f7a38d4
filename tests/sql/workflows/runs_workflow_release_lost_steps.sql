-- pgTAP tests for sql/functions/070_workflow_steps.sql: workflow_release_lost_steps: a worker
-- whose read lost its connection (the read may have committed, its answer never arrived) hands
-- back every attempt begun for it that it does not hold.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);
\ir ../include/workflow_runs_setup.psql

SELECT has_function('pgbus', 'workflow_release_lost_steps', ARRAY['text', 'bigint[]'],
                    'pgbus.workflow_release_lost_steps(text, bigint[]) exists');
-- host:1 read (and so began, bodies marked started) lost_a and lost_b; host:2 began other's.
DO $d$ BEGIN
    PERFORM pg_temp.go('lost_a', '[{"name": "a"}]');
    PERFORM pg_temp.go('lost_b', '[{"name": "a"}]');
    PERFORM pg_temp.start('lost_other', '[{"name": "a"}]');
    PERFORM pg_temp.read('lost_other_again', 'lost_other');
END $d$;
SELECT ok((pg_temp.att(pg_temp.cur('lost_a'))).body_started_at IS NOT NULL,
          'setup: lost_a''s attempt is running with its body marked started');
SELECT is(pgbus.workflow_release_lost_steps('host:1', ARRAY[pg_temp.cur('lost_b')]), 1,
          'workflow_release_lost_steps: the attempt begun for the worker and not held goes back');
SELECT results_eq(
    $$SELECT w.status, s.status, s.worker, s.body_started_at FROM pgbus.workflows w
      JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('lost_a')$$,
    $$VALUES ('ready'::text, 'scheduled'::text, NULL::text, NULL::timestamptz)$$,
    'workflow_release_lost_steps: scheduled again, never started, its run ready');
SELECT ok((SELECT vt <= clock_timestamp() FROM pgmq.q_t_wfr_lost_a),
          'workflow_release_lost_steps: its message is visible at once');
SELECT is(pg_temp.events('lost_a', (SELECT max(event_id) - 1 FROM pgbus.workflow_events
                                    WHERE workflow_id = pg_temp.run('lost_a'))),
          'step_released', 'workflow_release_lost_steps: a step_released event');
SELECT is((pg_temp.att(pg_temp.cur('lost_b'))).status, 'running',
          'workflow_release_lost_steps: an attempt the worker holds is left alone');
SELECT is((pg_temp.att(pg_temp.cur('lost_other'))).status, 'running',
          'workflow_release_lost_steps: another worker''s attempt is left alone');
SELECT ok((SELECT vt > clock_timestamp() FROM pgmq.q_t_wfr_lost_b),
          '... and the message of an attempt held stays hidden');
-- Read again by another worker: begun afresh, not a stall.
SELECT is(pg_temp.read('lost_a_again', 'lost_a'), 1, 'workflow_release_lost_steps: the message is read again');
SELECT ok(pg_temp.ctx('lost_a_again') ->> 'step_id' = pg_temp.cur('lost_a')::text
          AND NOT pg_temp.ctx('lost_a_again') ? 'stalled',
          'workflow_release_lost_steps: and begins the same attempt afresh (no stall)');
SELECT is(pgbus.workflow_release_lost_steps('host:1', NULL), 1,
          'workflow_release_lost_steps: NULL held: every attempt begun for the worker goes back');
SELECT is(pgbus.workflow_release_lost_steps('host:1', '{}'), 0,
          'workflow_release_lost_steps: nothing left to hand back');

SELECT * FROM finish();
ROLLBACK;
