-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_next_step.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);

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
-- workflow_next_step
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('next', '[{"name": "a", "wait": 1}, {"name": "b", "removed": true}, {"name": "c"},
                             {"name": "d", "removed": false}, {"name": "e", "removed": true}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.reg('next2', '[{"name": "x", "removed": true}, {"name": "y"}]'); END $d$;
SELECT is(pgbus.workflow_next_step('t_wfr_next', NULL), '{"name": "a", "wait": 1}'::jsonb,
          'workflow_next_step: NULL gives the first step, with its options');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'a') ->> 'name', 'c', 'workflow_next_step: passes over a gravestone');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'b') ->> 'name', 'c', 'workflow_next_step: after a gravestone comes the next step');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'c') ->> 'name', 'd', 'workflow_next_step: "removed": false is a step');
SELECT is(pgbus.workflow_next_step('t_wfr_next', 'd'), NULL, 'workflow_next_step: NULL when only gravestones follow');
SELECT is(pgbus.workflow_next_step('t_wfr_next2', NULL) ->> 'name', 'y', 'workflow_next_step: a gravestone first step is passed over');
SELECT is(pgbus.workflow_next_step('t_wfr_unknown', NULL), NULL, 'workflow_next_step: NULL for an unregistered class');

SELECT * FROM finish();
ROLLBACK;
