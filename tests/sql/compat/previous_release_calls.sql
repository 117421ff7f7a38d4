-- Rolling deploys: every SQL call the previous release's Python makes still resolves, and a
-- run driven by those calls (positional, with the argument types that release passes) still
-- works against the migrated schema. During a deploy the old workers run beside the new
-- schema: a changed signature keeps a thin wrapper with the old one for one release.
--
-- The previous release: 0.1.0 (the calls below are copied from its Python). When a release
-- changes a call, add the new shape to the next release's file and keep this one until the
-- release after.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(41);

-- Whether `call` names a function that exists for those argument types (EXPLAIN resolves the
-- call without running it).
CREATE FUNCTION pg_temp.resolves(call text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE 'EXPLAIN SELECT * FROM ' || call;
    RETURN true;
EXCEPTION WHEN undefined_function OR ambiguous_function THEN
    RETURN false;
END;
$f$;

SELECT ok(pg_temp.resolves(c), 'release 0.1.0 calls ' || c) FROM (VALUES
    ('pgbus.read_jobs(NULL::text[], NULL::integer, NULL::integer, NULL::text, NULL::text, NULL::text)'),
    ('pgbus.job_succeeded(NULL::text, NULL::bigint, NULL::integer, NULL::bigint, NULL::boolean, true)'),
    ('pgbus.jobs_succeeded(NULL::text, NULL::bigint[], NULL::integer[], NULL::bigint[], NULL::boolean)'),
    ('pgbus.job_failed(NULL::text, NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::integer, NULL::boolean)'),
    ('pgbus.dead_letter(NULL::text, NULL::bigint, NULL::jsonb, NULL::boolean)'),
    ('pgbus.enqueue(NULL::text, NULL::text, NULL::jsonb[], NULL::timestamptz, NULL::uuid)'),
    ('pgbus.ensure_queue(NULL::text, false)'),
    ('pgbus.extend_visibility(NULL::text, NULL::bigint[], NULL::integer)'),
    ('pgbus.batch_open(NULL::text, NULL::jsonb, NULL::jsonb, NULL::jsonb, NULL::jsonb)'),
    ('pgbus.batch_close(NULL::uuid)'),
    ('pgbus.batch_member_done(NULL::uuid, NULL::text, NULL::integer)'),
    ('pgbus.process_register(NULL::text, NULL::text, NULL::integer, NULL::text, NULL::jsonb)'),
    ('pgbus.process_heartbeat(NULL::bigint, NULL::jsonb)'),
    ('pgbus.process_deregister(NULL::bigint)'),
    ('pgbus.prune_stale_processes(NULL::interval)'),
    ('pgbus.cleanup_batches()'),
    ('pgbus.cleanup_job_stats(NULL::interval)'),
    ('pgbus.pgmq_info()'),
    ('pgbus.queue_read(NULL::text, 30, 10)'),
    ('pgbus.queue_send(NULL::text, ''{}''::jsonb, clock_timestamp())'),
    ('pgbus.queue_archive(NULL::text, NULL::bigint)'),
    ('pgbus.workflow_register(NULL::text, NULL::jsonb, NULL::text, NULL::text, NULL::text[])'),
    ('pgbus.workflow_start(NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::text, NULL::text)'),
    ('pgbus.workflow_command(NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::jsonb)'),
    ('pgbus.workflow_available_actions(NULL::uuid)'),
    ('pgbus.workflow_begin_step(NULL::text, NULL::bigint, NULL::jsonb, ''inline'', NULL::text, NULL::text)'),
    ('pgbus.workflow_end_step(NULL::bigint, NULL::text, NULL::jsonb, NULL::jsonb, NULL::interval, NULL::text, NULL::bigint, NULL::jsonb, NULL::bigint)'),
    ('pgbus.workflow_expire_wait(NULL::uuid)'),
    ('pgbus.workflow_fan_out_finished(NULL::bigint)'),
    ('pgbus.workflow_release_steps(NULL::bigint[], NULL::text)'),
    ('pgbus.workflow_sweep(NULL::interval, NULL::text, NULL::interval, overdue_after => NULL::interval, waiting_threshold => NULL::interval)'),
    ('pgbus.workflow_stuck(NULL::interval, NULL::interval, NULL::interval)')
) AS calls (c);

SELECT ok(NOT pg_temp.resolves('pgbus.workflow_end_step(NULL::uuid)'), 'the check tells a call that resolves from one that does not');

-- A run driven end to end by the previous release's calls, as its worker and API make them.
SELECT pgbus.workflow_register('t_prev', '[{"name": "one"}, {"name": "two"}]'::jsonb, 'd1', 't_prev', '{}'::text[]);
CREATE TEMP TABLE t_run AS
    SELECT * FROM pgbus.workflow_start('t_prev', 'User'::text, '1'::text, '{"a": 1}'::jsonb, NULL::text, 'old-worker'::text);
CREATE TEMP TABLE t_read AS
    SELECT * FROM pgbus.read_jobs(ARRAY['t_prev'], 30, 10, 'old:1'::text, 'rev-0.1.0'::text, 'pause'::text);
SELECT is((SELECT context ->> 'step_name' FROM t_read), 'one', 'read_jobs (0.1.0 call) begins the first step');
SELECT is(pgbus.workflow_end_step((SELECT (context ->> 'step_id')::bigint FROM t_read), 'complete',
                                  '{"x": 1}'::jsonb, NULL::jsonb, NULL::interval, NULL::text, NULL::bigint, NULL::jsonb, NULL::bigint) ->> 'status',
          'ready', 'workflow_end_step (0.1.0 call) completes it and schedules the next');
SELECT is(pgbus.workflow_command((SELECT workflow_id FROM t_run), 'pause', 'alice'::text, 'why'::text, '{}'::jsonb) ->> 'status',
          'paused', 'workflow_command (0.1.0 call) pauses');
SELECT is(pgbus.workflow_available_actions((SELECT workflow_id FROM t_run)), ARRAY['resume', 'resume_at', 'signal', 'cancel'],
          'workflow_available_actions (0.1.0 call)');
SELECT is(pgbus.workflow_command((SELECT workflow_id FROM t_run), 'resume', 'alice'::text, NULL::text, '{}'::jsonb) ->> 'status',
          'ready', 'workflow_command (0.1.0 call) resumes');
DELETE FROM t_read;
INSERT INTO t_read SELECT * FROM pgbus.read_jobs(ARRAY['t_prev'], 30, 10, 'old:1'::text, 'rev-0.1.0'::text, 'pause'::text);
SELECT is(pgbus.workflow_end_step((SELECT (context ->> 'step_id')::bigint FROM t_read), 'complete',
                                  NULL::jsonb, NULL::jsonb, NULL::interval, NULL::text, NULL::bigint, NULL::jsonb, NULL::bigint) ->> 'status',
          'finished', 'the run finishes through the 0.1.0 calls');
SELECT is(pgbus.workflow_sweep(interval '15 minutes', 'pause', interval '30 days', overdue_after => interval '5 minutes',
                               waiting_threshold => interval '7 days') ->> 'deleted', '0', 'workflow_sweep (0.1.0 call)');
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_prev_jobs', 'app:Job', ARRAY['{"args": [], "kwargs": {}}'::jsonb], NULL::timestamptz, NULL::uuid)),
          1::bigint, 'enqueue (0.1.0 call) sends a job');

SELECT * FROM finish();
ROLLBACK;
