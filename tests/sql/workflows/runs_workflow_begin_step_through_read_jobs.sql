-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_begin_step through read_jobs: the happy path.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);

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
-- workflow_begin_step through read_jobs: the happy path
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('begin', '[{"name": "a", "timeout": 60}, {"name": "b"}]'); END $d$;
INSERT INTO t_runs SELECT 'begin', s.* FROM pgbus.workflow_start('t_wfr_begin', 'Order', '7', '{"k": "v"}') s;
DO $d$ BEGIN PERFORM pg_temp.mark('begin_step', to_jsonb(pg_temp.cur('begin'))); END $d$;
SELECT is(pg_temp.read('begin', 'begin'), 1, 'read_jobs: a step''s message is read');
SELECT results_eq(
    $$SELECT queue, msg_id, read_ct, message ->> 'job_class', vt > clock_timestamp() FROM t_reads WHERE tag = 'begin'$$,
    $$VALUES ('t_wfr_begin'::text, (pg_temp.att(pg_temp.cur('begin'))).msg_id, 1, pgbus.step_job_class(), true)$$,
    'read_jobs: the row is the attempt''s message, read once and hidden');
SELECT is(pg_temp.ctx('begin') - 'begun_at' - 'body_started' - 'timeout',
          jsonb_build_object('workflow_id', pg_temp.run('begin'), 'workflow_class', 't_wfr_begin',
                             'step_id', pg_temp.cur('begin'), 'step_name', 'a', 'attempt', 1,
                             'arguments', '{"k": "v"}'::jsonb, 'subject_type', 'Order', 'subject_id', '7',
                             'scheduled_at', (pg_temp.att(pg_temp.cur('begin'))).scheduled_at, 'definition_outdated', false),
          'workflow_begin_step: the context has the run, class, step, attempt, arguments, subject, schedule, definition_outdated');
SELECT is((pg_temp.ctx('begin') ->> 'begun_at')::timestamptz, (pg_temp.att(pg_temp.cur('begin'))).started_at,
          'workflow_begin_step: ... begun_at, the begin''s token, is the attempt''s started_at');
SELECT is(pg_temp.ctx('begin') -> 'body_started', 'true'::jsonb,
          'workflow_begin_step: ... body_started (the default: the caller starts the body at once)');
SELECT is((pg_temp.att(pg_temp.cur('begin'))).body_started_at, (pg_temp.att(pg_temp.cur('begin'))).started_at,
          'workflow_begin_step: ... and the attempt''s body_started_at is set');
SELECT is(pg_temp.cur('begin'), (pg_temp.marked('begin_step'))::bigint, 'workflow_begin_step: the attempt stays current');
SELECT results_eq(
    $$SELECT status, started_at IS NOT NULL AND started_at <= clock_timestamp(), worker, app_revision, ended_at
      FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('begin')$$,
    $$VALUES ('running'::text, true, 'host:1'::text, 'rev'::text, NULL::timestamptz)$$,
    'workflow_begin_step: the attempt is running, with worker and app revision');
SELECT is((pg_temp.w('begin')).status, 'running', 'workflow_begin_step: the run is running');
SELECT is(pg_temp.events('begin'), 'started,step_scheduled,step_started', 'workflow_begin_step: a step_started event');
SELECT results_eq(
    $$SELECT step_id, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('begin') AND event = 'step_started'$$,
    $$VALUES (pg_temp.cur('begin'), '{"step": "a", "attempt": 1, "worker": "host:1"}'::jsonb)$$,
    'workflow_begin_step: step_started names the step, attempt and worker');
SELECT is(pg_temp.has_amsg(pg_temp.cur('begin')), true, 'workflow_begin_step: the message stays in the queue while the step runs');
SELECT is(pg_temp.read('begin_again', 'begin'), 0, 'read_jobs: the running step''s message is hidden');

SELECT * FROM finish();
ROLLBACK;
