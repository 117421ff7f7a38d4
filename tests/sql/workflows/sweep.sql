-- pgTAP tests for sql/functions/086_workflow_sweep.sql: one function per repair, each callable on
-- its own (pg_cron); each run repaired on its own (a repair that raises is undone for its run,
-- recorded and answered; the others go on); the runs whose status a repair changed ("moved");
-- lost steps sent through workflow_send_step; failures of step messages that are gone
-- forgotten. (What each repair does to a run: workflow_commands.sql and workflow_waiting.sql.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(24);

CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfs_' || $1 $f$;
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
    INSERT INTO t_reads SELECT read.tag, r.* FROM pgbus.read_jobs(ARRAY[pg_temp.cls(queue)], 30, 10, 'gone:1', 'rev') r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$f$;
CREATE FUNCTION pg_temp.ctx(tag text) RETURNS jsonb LANGUAGE sql AS $f$ SELECT context FROM t_reads WHERE t_reads.tag = $1 $f$;
-- A run whose one step began long ago (its worker is gone): the stall repair's work.
CREATE FUNCTION pg_temp.hung(name text) RETURNS bigint LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_temp.go(name, '[{"name": "a"}, {"name": "b"}]');
    UPDATE pgbus.workflow_steps SET started_at = now() - interval '1 hour' WHERE step_id = pg_temp.cur(name);
    RETURN pg_temp.cur(name);
END;
$f$;
-- A failure recorded against the message of attempt `step_id`, as the worker's job_failed does.
CREATE FUNCTION pg_temp.fail(step_id bigint) RETURNS void LANGUAGE sql AS $f$
    INSERT INTO pgbus.job_failures (queue_name, msg_id, job_class, error_class, error_message, read_ct)
    SELECT a.queue, a.msg_id, pgbus.step_job_class(), 'pgbus.workflow.StepBeginFailed', 'could not begin', 1
    FROM pgbus.workflow_steps a WHERE a.step_id = $1
$f$;
CREATE FUNCTION pg_temp.failures(step_id bigint) RETURNS bigint LANGUAGE sql AS $f$
    SELECT count(*) FROM pgbus.job_failures f JOIN pgbus.workflow_steps a ON a.queue = f.queue_name AND a.msg_id = f.msg_id
    WHERE a.step_id = $1
$f$;
-- Makes the stall of attempt `marked('boom')` raise, as a broken repair would.
CREATE FUNCTION pg_temp.explode() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    IF NEW.step_id = (pg_temp.marked('boom'))::bigint AND NEW.status = 'stalled' THEN
        RAISE EXCEPTION 'the repair exploded' USING ERRCODE = 'P0001';
    END IF;
    RETURN NEW;
END;
$f$;

-- Start from no runs at all, so that the answers are exact (undone by the ROLLBACK).
DELETE FROM pgbus.workflows;

-------------------------------------------------------------------------------------------------
-- One function per repair, each callable on its own with its defaults (pg_cron)
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.workflow_sweep_stalls(), '{"done": [], "failed": []}'::jsonb, 'workflow_sweep_stalls() runs on its own');
SELECT is(pgbus.workflow_sweep_wait_timeouts(), '{"done": [], "failed": []}'::jsonb, 'workflow_sweep_wait_timeouts() runs on its own');
SELECT is(pgbus.workflow_sweep_fan_outs(), '{"done": [], "failed": []}'::jsonb, 'workflow_sweep_fan_outs() runs on its own');
SELECT is(pgbus.workflow_sweep_lost_steps(), '{"done": [], "failed": []}'::jsonb, 'workflow_sweep_lost_steps() runs on its own');
SELECT is(pgbus.workflow_sweep_old_runs(), 0, 'workflow_sweep_old_runs() runs on its own');
SELECT is(pgbus.workflow_sweep_failures(), 0, 'workflow_sweep_failures() runs on its own');
SELECT is(pgbus.workflow_gauges(), '{"runs": [], "stuck": []}'::jsonb, 'workflow_gauges() runs on its own (sql/functions/132_workflow_gauges.sql)');
SELECT throws_ok($$SELECT pgbus.workflow_sweep_stalls(stall_action => 'explode')$$, '22023', NULL,
                 'workflow_sweep_stalls: an unknown stall action refuses the whole call');

-------------------------------------------------------------------------------------------------
-- Each run on its own: a repair that raises is undone for its run alone
-------------------------------------------------------------------------------------------------
SELECT pg_temp.mark('boom', to_jsonb(pg_temp.hung('boom')));
SELECT pg_temp.mark('ok1', to_jsonb(pg_temp.hung('ok1')));
SELECT pg_temp.mark('ok2', to_jsonb(pg_temp.hung('ok2')));
CREATE TRIGGER t_explode BEFORE UPDATE ON pgbus.workflow_steps FOR EACH ROW EXECUTE FUNCTION pg_temp.explode();
SELECT pg_temp.mark('sweep', pgbus.workflow_sweep());
DROP TRIGGER t_explode ON pgbus.workflow_steps;
SELECT results_eq($$SELECT (pg_temp.w(n)).status FROM unnest(ARRAY['ok1', 'ok2']) n$$,
                  $$VALUES ('paused'::text), ('paused'::text)$$,
                  'workflow_sweep: the other runs are repaired (stalled, paused) although one repair raised');
SELECT results_eq($$SELECT (pg_temp.w('boom')).status, (pg_temp.att(pg_temp.cur('boom'))).status$$,
                  $$VALUES ('running'::text, 'running'::text)$$,
                  'workflow_sweep: ... the run whose repair raised is as it was');
SELECT results_eq($$SELECT e.actor, e.reason, e.details ->> 'repair', e.details ->> 'sqlstate' FROM pg_temp.ev('boom', 'repair_failed') e$$,
                  $$VALUES ('pgbus'::text, 'the repair exploded'::text, 'stall'::text, 'P0001'::text)$$,
                  'workflow_sweep: ... the failure is recorded on it (a repair_failed event by pgbus)');
SELECT is(pg_temp.marked('sweep') -> 'failed',
          jsonb_build_array(jsonb_build_object(
              'workflow_id', pg_temp.run('boom'), 'workflow_class', 't_wfs_boom', 'step', 'a', 'was', 'running',
              'status', 'running', 'error_class', NULL, 'repair', 'stall',
              'error', jsonb_build_object('class', 'pgbus.SweepRepairFailed', 'sqlstate', 'P0001',
                                          'message', 'the repair exploded'))),
          'workflow_sweep: ... and answered under "failed" for the dispatcher to report');
SELECT set_eq($$SELECT e ->> 'workflow_id' FROM jsonb_array_elements(pg_temp.marked('sweep') -> 'stalled') e$$,
              $$VALUES (pg_temp.run('ok1')::text), (pg_temp.run('ok2')::text)$$,
              'workflow_sweep: "stalled" lists the runs repaired');
SELECT is(pgbus.workflow_sweep_stalls() -> 'done' -> 0 ->> 'workflow_id', pg_temp.run('boom')::text,
          'workflow_sweep_stalls: the next sweep repairs the run that failed before');

-------------------------------------------------------------------------------------------------
-- "moved": the runs whose status a repair changed, once each
-------------------------------------------------------------------------------------------------
SELECT set_eq($$SELECT e - 'action' FROM jsonb_array_elements(pg_temp.marked('sweep') -> 'moved') e$$,
              $$SELECT jsonb_build_object('workflow_id', pg_temp.run(n), 'workflow_class', pg_temp.cls(n), 'step', 'a',
                                          'was', 'running', 'status', 'paused', 'error_class', 'pgbus.StepStalled')
                FROM unnest(ARRAY['ok1', 'ok2']) n$$,
              'workflow_sweep: "moved" lists the runs it paused, with their status before and after');
DO $d$ BEGIN PERFORM pg_temp.hung('manual'); PERFORM pgbus.workflow_command(pg_temp.run('manual'), 'pause'); END $d$;
SELECT pg_temp.mark('sweep2', pgbus.workflow_sweep());
SELECT results_eq($$SELECT e ->> 'was', e ->> 'status' FROM jsonb_array_elements(pg_temp.marked('sweep2') -> 'stalled') e$$,
                  $$VALUES ('paused'::text, 'paused'::text)$$,
                  'workflow_sweep: a run paused by an operator is stalled and stays paused');
SELECT is(pg_temp.marked('sweep2') -> 'moved', '[]'::jsonb, 'workflow_sweep: ... which is no move (it was paused already)');
DO $d$ BEGIN PERFORM pg_temp.hung('cancel'); END $d$;
SELECT results_eq($$SELECT e ->> 'workflow_id', e ->> 'was', e ->> 'status'
                    FROM jsonb_array_elements(pgbus.workflow_sweep(stall_action => 'cancel') -> 'moved') e$$,
                  $$VALUES (pg_temp.run('cancel')::text, 'running'::text, 'cancelled'::text)$$,
                  'workflow_sweep: a run the stall action cancels moved to cancelled');

-------------------------------------------------------------------------------------------------
-- Lost steps: sent again through workflow_send_step
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN
    PERFORM pg_temp.start('lost', '[{"name": "a"}]');
    PERFORM pg_temp.mark('lost_msg', to_jsonb((pg_temp.amsg(pg_temp.cur('lost'))).message));
    EXECUTE format('DELETE FROM pgmq.%I', 'q_' || pg_temp.cls('lost'));
    UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('lost');
END $d$;
SELECT is(jsonb_array_length(pgbus.workflow_sweep_lost_steps() -> 'done'), 1, 'workflow_sweep_lost_steps: the lost step is sent again');
SELECT is((pg_temp.amsg(pg_temp.cur('lost'))).message - 'job_id' - 'enqueued_at',
          pg_temp.marked('lost_msg') - 'job_id' - 'enqueued_at',
          'workflow_sweep_lost_steps: ... as the same message every step sends (workflow_send_step)');

-------------------------------------------------------------------------------------------------
-- job_failures of step messages that are gone
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN
    PERFORM pg_temp.start('ended', '[{"name": "a"}]');
    PERFORM pg_temp.fail(pg_temp.cur('ended'));
    PERFORM pg_temp.mark('ended_step', to_jsonb(pg_temp.cur('ended')));
    PERFORM pg_temp.read('ended', 'ended');
    PERFORM pgbus.workflow_end_step((pg_temp.ctx('ended') ->> 'step_id')::bigint, 'complete');
    PERFORM pg_temp.start('kept', '[{"name": "a"}]');
    PERFORM pg_temp.fail(pg_temp.cur('kept'));
    PERFORM pg_temp.start('paused', '[{"name": "a"}]');
    PERFORM pg_temp.fail(pg_temp.cur('paused'));
    PERFORM pg_temp.mark('paused_step', to_jsonb(pg_temp.cur('paused')));
    PERFORM pgbus.workflow_command(pg_temp.run('paused'), 'pause');
    -- A plain job's failure, its message gone too: the job layer's own business.
    INSERT INTO pgbus.job_failures (queue_name, msg_id, job_class, error_class, error_message, read_ct)
    VALUES (pg_temp.cls('kept'), 999999, 'app:Job', 'Boom', 'boom', 1);
END $d$;
SELECT is(pgbus.workflow_sweep_failures(), 2,
          'workflow_sweep_failures: the failures of the ended step''s and the superseded step''s messages go');
SELECT results_eq($$SELECT pg_temp.failures((pg_temp.marked('ended_step'))::bigint), pg_temp.failures((pg_temp.marked('paused_step'))::bigint)$$,
                  $$VALUES (0::bigint, 0::bigint)$$, 'workflow_sweep_failures: ... gone');
SELECT is(pg_temp.failures(pg_temp.cur('kept')), 1::bigint,
          'workflow_sweep_failures: the failure of a step message still in its queue stays');
SELECT is((SELECT count(*) FROM pgbus.job_failures WHERE job_class = 'app:Job'), 1::bigint,
          'workflow_sweep_failures: a plain job''s failure stays');

SELECT * FROM finish();
ROLLBACK;
