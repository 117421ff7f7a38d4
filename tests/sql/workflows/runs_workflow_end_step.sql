-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_end_step: bad verbs and unknown attempts.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(5);

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
-- workflow_end_step: bad verbs and unknown attempts.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.go('badverb', '[{"name": "a"}]'); END $d$;
SELECT throws_ok(format('SELECT pgbus.workflow_end_step(%s, %L)', pg_temp.cur('badverb'), 'explode'), '22023',
                 'pgbus: ''explode'' is not a step verb', 'workflow_end_step: an unknown verb raises 22023');
SELECT throws_ok(format('SELECT pgbus.workflow_end_step(%s, NULL)', pg_temp.cur('badverb')), '22023', NULL,
                 'workflow_end_step: a NULL verb raises 22023');
SELECT throws_ok(format('SELECT pgbus.workflow_end_step(%s, %L)', pg_temp.cur('badverb'), 'resume'), '22023', NULL,
                 'workflow_end_step: an outside verb raises 22023');
SELECT is((pg_temp.att(pg_temp.cur('badverb'))).status, 'running', 'workflow_end_step: a bad verb leaves the attempt running');
SELECT is(pgbus.workflow_end_step(987654321, 'complete'), '{"ok": false, "code": "not_found"}'::jsonb,
          'workflow_end_step: an unknown attempt is not_found');

SELECT * FROM finish();
ROLLBACK;
