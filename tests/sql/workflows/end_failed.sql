-- pgTAP tests for sql/functions/087_workflow_end_failed.sql: a step's end that raised is recorded
-- as itself (the attempt failed with the error, the run paused with cause error, the message
-- archived), not left to look like a dead worker's.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(14);

CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfe_' || $1 $f$;
\ir ../include/workflow_helpers.psql
CREATE FUNCTION pg_temp.start(name text, steps text) RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name));
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;
CREATE FUNCTION pg_temp.read(tag text, queue text) RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE
    n integer;
BEGIN
    INSERT INTO t_reads SELECT read.tag, r.* FROM pgbus.read_jobs(ARRAY[pg_temp.cls(queue)], 30, 10, 'host:1', 'rev') r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$f$;
CREATE FUNCTION pg_temp.ctx(tag text) RETURNS jsonb LANGUAGE sql AS $f$ SELECT context FROM t_reads WHERE t_reads.tag = $1 $f$;
CREATE TEMP TABLE t_err AS SELECT '{"class": "psycopg.errors.CheckViolation", "message": "new row violates check constraint", "sqlstate": "23514"}'::jsonb AS e;

SELECT has_function('pgbus', 'workflow_end_failed', ARRAY['bigint', 'jsonb', 'timestamp with time zone'],
                    'pgbus.workflow_end_failed(bigint, jsonb, timestamptz) exists');

SELECT pg_temp.mark('a', to_jsonb(pg_temp.go('bad_end', '[{"name": "a"}, {"name": "b"}]')));
SELECT pg_temp.mark('a_msg', to_jsonb((pg_temp.att((pg_temp.marked('a'))::bigint)).msg_id));
SELECT is(pgbus.workflow_end_failed((pg_temp.marked('a'))::bigint, (SELECT e FROM t_err)),
          '{"ok": true, "was": "running", "status": "paused"}'::jsonb,
          'workflow_end_failed: answers the run paused from running');
SELECT results_eq($$SELECT status, error_class, error ->> 'sqlstate' FROM pgbus.workflow_steps WHERE step_id = (pg_temp.marked('a'))::bigint$$,
                  $$VALUES ('failed'::text, 'psycopg.errors.CheckViolation'::text, '23514'::text)$$,
                  'workflow_end_failed: the attempt failed with the error itself (not StepStalled)');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('bad_end')$$,
                  $$VALUES ('paused'::text, 'error'::text)$$, 'workflow_end_failed: the run is paused (error)');
SELECT is(pg_temp.has_msg(pg_temp.cls('bad_end'), (pg_temp.marked('a_msg'))::bigint), false,
          'workflow_end_failed: the message is archived (it will not come back as a stall)');
SELECT is(pg_temp.has_msg(pg_temp.cls('bad_end'), (pg_temp.marked('a_msg'))::bigint, 'a'), true, '... into the archive');
SELECT is((pg_temp.ev('bad_end', 'step_failed')).reason, 'its end failed', 'workflow_end_failed: a step_failed event says its end failed');
SELECT is(pgbus.workflow_end_failed((pg_temp.marked('a'))::bigint, (SELECT e FROM t_err)) ->> 'code', 'stale',
          'workflow_end_failed: a second call is stale and changes nothing');
SELECT is(pgbus.workflow_end_failed(-1, (SELECT e FROM t_err)) ->> 'code', 'not_found', 'workflow_end_failed: an unknown attempt');
-- An earlier begin of an attempt begun again is stale.
SELECT pg_temp.mark('b', to_jsonb(pg_temp.go('rebegun', '[{"name": "a"}]')));
SELECT is(pgbus.workflow_end_failed((pg_temp.marked('b'))::bigint, (SELECT e FROM t_err), begun_at => '2000-01-01') ->> 'code', 'stale',
          'workflow_end_failed: the failure of another begin of the attempt changes nothing');
SELECT throws_ok($$SELECT pgbus.workflow_end_failed((pg_temp.marked('b'))::bigint, '{"message": "x"}')$$, '22023', NULL,
                 'workflow_end_failed: an error without a class is refused');


-- workflow_time_out_step_answer: the timeout's stall, with the run's status before it.
SELECT pg_temp.mark('t1', to_jsonb(pg_temp.go('late', '[{"name": "a"}]')));
SELECT is(pgbus.workflow_time_out_step_answer((pg_temp.marked('t1'))::bigint,
                                              (pg_temp.att((pg_temp.marked('t1'))::bigint)).started_at),
          '{"was": "running", "status": "paused"}'::jsonb,
          'workflow_time_out_step_answer: a late step stalls and pauses its running run');
SELECT pg_temp.mark('t2', to_jsonb(pg_temp.go('late_paused', '[{"name": "a"}]')));
SELECT is(pgbus.workflow_command(pg_temp.run('late_paused'), 'pause') ->> 'status', 'paused', 'setup: paused by an operator');
SELECT is(pgbus.workflow_time_out_step_answer((pg_temp.marked('t2'))::bigint,
                                              (pg_temp.att((pg_temp.marked('t2'))::bigint)).started_at),
          '{"was": "paused", "status": "paused"}'::jsonb,
          'workflow_time_out_step_answer: ... a run paused already stays paused (was paused: no event)');

SELECT * FROM finish();
ROLLBACK;
