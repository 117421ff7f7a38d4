-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_start: idempotency keys.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);

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
-- workflow_start: idempotency keys
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('idem', '[{"name": "a"}]'); END $d$;
INSERT INTO t_runs SELECT 'k1', s.* FROM pgbus.workflow_start('t_wfr_idem', arguments => '{"n": 1}', idempotency_key => 'k1') s;
INSERT INTO t_runs SELECT 'k1_again', s.* FROM pgbus.workflow_start('t_wfr_idem', arguments => '{"n": 2}', idempotency_key => 'k1') s;
SELECT is((SELECT dup FROM t_runs WHERE name = 'k1'), false, 'workflow_start: the first start with a key is not a duplicate');
SELECT is((pg_temp.w('k1')).idempotency_key, 'k1', 'workflow_start: the key is stored');
SELECT is(pg_temp.run('k1_again'), pg_temp.run('k1'), 'workflow_start: the same key answers the same run');
SELECT is((SELECT dup FROM t_runs WHERE name = 'k1_again'), true, 'workflow_start: ... with duplicate_start = true');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfr_idem'), 1::bigint,
          'workflow_start: a duplicate start creates no run');
SELECT is((pg_temp.w('k1')).arguments, '{"n": 1}'::jsonb, 'workflow_start: a duplicate start does not change the run');
SELECT is(pg_temp.events('k1'), 'started,step_scheduled', 'workflow_start: a duplicate start writes no event');
SELECT is((SELECT count(*) FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('k1')), 1::bigint,
          'workflow_start: a duplicate start schedules no step');
DO $d$ BEGIN PERFORM pg_temp.reg('idem2', '[{"name": "a"}]'); END $d$;
INSERT INTO t_runs SELECT 'k1_other', s.* FROM pgbus.workflow_start('t_wfr_idem2', idempotency_key => 'k1') s;
SELECT isnt(pg_temp.run('k1_other'), pg_temp.run('k1'), 'workflow_start: the same key in another class is another run');
INSERT INTO t_runs SELECT 'blank1', s.* FROM pgbus.workflow_start('t_wfr_idem', idempotency_key => '') s;
INSERT INTO t_runs SELECT 'blank2', s.* FROM pgbus.workflow_start('t_wfr_idem', idempotency_key => '   ') s;
SELECT isnt(pg_temp.run('blank1'), pg_temp.run('blank2'), 'workflow_start: a blank key is no key (two runs)');
SELECT results_eq($$SELECT dup, (pg_temp.w(name)).idempotency_key FROM t_runs WHERE name IN ('blank1', 'blank2') ORDER BY name$$,
                  $$VALUES (false, NULL::text), (false, NULL::text)$$,
                  'workflow_start: a blank key is not stored and not a duplicate');
-- A repeated key answers its run even while that run is ongoing for its subject.
INSERT INTO t_runs SELECT 'k2', s.* FROM pgbus.workflow_start('t_wfr_idem', 'User', '1', idempotency_key => 'k2') s;
SELECT results_eq($$SELECT s.workflow_id, s.duplicate_start FROM pgbus.workflow_start('t_wfr_idem', 'User', '1', idempotency_key => 'k2') s$$,
                  $$VALUES (pg_temp.run('k2'), true)$$,
                  'workflow_start: a repeated key for an ongoing subject answers the run (no PB409)');

SELECT * FROM finish();
ROLLBACK;
