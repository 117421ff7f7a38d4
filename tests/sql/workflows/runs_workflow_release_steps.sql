-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_release_steps: a stopping worker hands back steps it read ahead.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(14);

-- Every scenario has its own class and queue ('t_wfr_<name>'), so that reading one scenario's
-- step begins no other.
CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfr_' || $1 $f$;
\ir ../include/workflow_helpers.psql
-- Registers t_wfr_<name> and starts a run of it, remembered as `name`.
CREATE FUNCTION pg_temp.start(name text, steps text, arguments jsonb DEFAULT '{}') RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name), arguments => start.arguments, actor => 'tester');
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;
-- Reads the queue t_wfr_<queue> the way a worker does; keeps the rows under `tag`; how many
-- (NULL, with a warning, when read_jobs raised).
CREATE FUNCTION pg_temp.read(tag text, queue text, stall_action text DEFAULT 'pause') RETURNS integer
LANGUAGE plpgsql AS $f$
DECLARE
    n integer;
BEGIN
    INSERT INTO t_reads
    -- (A redelivery, tagged '..._again', is read by another worker than the first read.)
    SELECT read.tag, r.* FROM pgbus.read_jobs(ARRAY[pg_temp.cls(queue)], 30, 10,
                                              CASE WHEN tag LIKE '%again%' THEN 'host:2' ELSE 'host:1' END,
                                              'rev', stall_action) r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
EXCEPTION WHEN OTHERS THEN
    -- Shown on stderr; the read is undone and the tests that follow go on (and fail).
    RAISE WARNING 'pg_temp.read(%, %): read_jobs raised %: %', tag, queue, SQLSTATE, SQLERRM;
    RETURN NULL;
END;
$f$;
CREATE FUNCTION pg_temp.ctx(tag text) RETURNS jsonb LANGUAGE sql AS $f$ SELECT context FROM t_reads WHERE t_reads.tag = $1 $f$;
-- workflow_end_step, with an error it raises answered as {"raised": SQLSTATE, "message": ...} so
-- that the tests after it still run (the failed call's changes are undone).
CREATE FUNCTION pg_temp.end_step(step_id bigint, verb text, output jsonb DEFAULT NULL, error jsonb DEFAULT NULL,
                                 wait interval DEFAULT NULL, reason text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $f$
BEGIN
    RETURN pgbus.workflow_end_step(step_id, verb, output, error, wait, reason);
EXCEPTION WHEN OTHERS THEN
    RETURN jsonb_build_object('raised', SQLSTATE, 'message', SQLERRM);
END;
$f$;
-- The run's row, attempts and event count, to show that something changed nothing.
CREATE FUNCTION pg_temp.state(name text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT jsonb_build_object(
        'run', (SELECT to_jsonb(w) FROM pgbus.workflows w WHERE w.workflow_id = pg_temp.run($1)),
        'steps', (SELECT jsonb_agg(to_jsonb(s) ORDER BY s.step_id) FROM pgbus.workflow_steps s WHERE s.workflow_id = pg_temp.run($1)),
        'events', (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = pg_temp.run($1)))
$f$;

-------------------------------------------------------------------------------------------------
-- workflow_release_steps: a stopping worker hands back steps it read ahead
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'workflow_release_steps', ARRAY['bigint[]', 'text'],
                    'pgbus.workflow_release_steps(bigint[], text) exists');
DO $d$ BEGIN PERFORM pg_temp.go('rel', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:2'), 0,
          'workflow_release_steps: another worker''s attempt is left alone');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:1'), 1,
          'workflow_release_steps: the reading worker''s begun attempt goes back');
SELECT results_eq(
    $$SELECT w.status, s.status, s.started_at, s.worker, s.app_revision, s.ended_at
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('rel')$$,
    $$VALUES ('ready'::text, 'scheduled'::text, NULL::timestamptz, NULL::text, NULL::text, NULL::timestamptz)$$,
    'workflow_release_steps: the attempt is scheduled again, never started, and the run ready');
SELECT results_eq(
    $$SELECT event, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rel') ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('step_released'::text, 'its worker stopped'::text, '{"step": "a", "attempt": 1, "worker": "host:1"}'::jsonb)$$,
    'workflow_release_steps: a step_released event');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:1'), 0,
          'workflow_release_steps: a scheduled attempt is left alone (released once)');
UPDATE pgmq.q_t_wfr_rel SET vt = now();
SELECT is(pg_temp.read('rel_again', 'rel'), 1, 'workflow_release_steps: the message is read again');
SELECT is((pg_temp.ctx('rel_again') ->> 'step_id')::bigint, pg_temp.cur('rel'),
          'workflow_release_steps: and begins the same attempt afresh (no stall)');
-- Paused while it was read ahead: the attempt is superseded; resume sends the step again.
DO $d$ BEGIN PERFORM pg_temp.go('rel_paused', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_command(pg_temp.run('rel_paused'), 'pause') ->> 'status', 'paused', 'setup: paused');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel_paused')], 'host:1'), 1,
          'workflow_release_steps: an attempt of a paused run goes back too');
SELECT results_eq(
    $$SELECT w.status, s.status, s.ended_at IS NOT NULL FROM pgbus.workflows w
      JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('rel_paused')$$,
    $$VALUES ('paused'::text, 'superseded'::text, true)$$,
    'workflow_release_steps: a paused run stays paused, its attempt superseded');
SELECT is(pgbus.workflow_command(pg_temp.run('rel_paused'), 'resume') ->> 'status', 'ready',
          'workflow_release_steps: resume then sends the step again');
SELECT is(pg_temp.attempts('rel_paused'), 'a#1:superseded,a#2:scheduled', '... as a new attempt');
SELECT is(pgbus.workflow_release_steps(NULL, 'host:1'), 0, 'workflow_release_steps: NULL releases nothing');

SELECT * FROM finish();
ROLLBACK;
