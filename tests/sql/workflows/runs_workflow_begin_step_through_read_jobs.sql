-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_begin_step through read_jobs: the happy path.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);
\ir ../include/workflow_runs_setup.psql
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
