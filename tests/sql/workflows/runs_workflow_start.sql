-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_start: the happy path; workflow_start: refusals.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(25);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_start: the happy path
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('start', '[{"name": "a", "wait": 0, "timeout": 90}, {"name": "b", "wait": 0}]'); END $d$;
INSERT INTO t_runs SELECT 'happy', s.* FROM pgbus.workflow_start('t_wfr_start', 'User', '42', '{"x": 1}', NULL, 'tester') s;
SELECT isnt(pg_temp.run('happy'), NULL, 'workflow_start: returns the run id');
SELECT is((SELECT dup FROM t_runs WHERE name = 'happy'), false, 'workflow_start: a new run is not a duplicate start');
SELECT results_eq(
    $$SELECT workflow_class, subject_type, subject_id, arguments, status, pause_cause, current_step, idempotency_key,
             definition_digest, rerun_of, created_at, ended_at
      FROM pgbus.workflows WHERE workflow_id = pg_temp.run('happy')$$,
    $$VALUES ('t_wfr_start'::text, 'User'::text, '42'::text, '{"x": 1}'::jsonb, 'ready'::text, NULL::text, 'a'::text,
              NULL::text, 'd1'::text, NULL::uuid, now(), NULL::timestamptz)$$,
    'workflow_start: the run is ready at its first step, with class, subject, arguments and digest');
SELECT results_eq(
    $$SELECT step_id, step_name, attempt, status, queue, msg_id IS NOT NULL, pg_temp.recent(scheduled_at), timeout, started_at, ended_at
      FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('happy')$$,
    $$VALUES (pg_temp.cur('happy'), 'a'::text, 1, 'scheduled'::text, 't_wfr_start'::text, true, true,
              interval '90 seconds', NULL::timestamptz, NULL::timestamptz)$$,
    'workflow_start: one attempt of the first step, scheduled now in the class queue, with its timeout, current');
SELECT results_eq(
    $$SELECT (m).message ->> 'job_class', (m).message -> 'kwargs', (m).message -> 'args', (m).message ->> 'queue',
             (m).read_ct, (m).vt <= clock_timestamp(), (m).message ? 'scheduled_at'
      FROM (SELECT pg_temp.amsg(pg_temp.cur('happy')) AS m) x$$,
    $$VALUES (pgbus.step_job_class(), jsonb_build_object('workflow_id', pg_temp.run('happy'), 'step_id', pg_temp.cur('happy')),
              '[]'::jsonb, 't_wfr_start'::text, 0, true, false)$$,
    'workflow_start: the StepJob message carries {workflow_id, step_id} and is visible now');
SELECT is(pg_temp.events('happy'), 'started,step_scheduled', 'workflow_start: events started, step_scheduled');
SELECT results_eq(
    $$SELECT step_id, actor, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('happy') AND event = 'started'$$,
    $$VALUES (NULL::bigint, 'tester'::text, NULL::text, '{}'::jsonb)$$,
    'workflow_start: the started event has the actor and no details');
SELECT results_eq(
    $$SELECT step_id, actor, details ->> 'step', (details ->> 'attempt')::int, (details ->> 'scheduled_at')::timestamptz
      FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('happy') AND event = 'step_scheduled'$$,
    $$VALUES (pg_temp.cur('happy'), 'tester'::text, 'a'::text, 1, (pg_temp.att(pg_temp.cur('happy'))).scheduled_at)$$,
    'workflow_start: the step_scheduled event names the attempt, step, attempt number and time');

-- The first step's wait.
DO $d$ BEGIN PERFORM pg_temp.start('wait', '[{"name": "a", "wait": 3600}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.recent((pg_temp.att(pg_temp.cur('wait'))).scheduled_at, interval '1 hour'), true,
          'workflow_start: the first step''s wait schedules its attempt later');
SELECT is((pg_temp.amsg(pg_temp.cur('wait'))).vt, (pg_temp.att(pg_temp.cur('wait'))).scheduled_at,
          'workflow_start: its message is visible only then');
SELECT is(((pg_temp.amsg(pg_temp.cur('wait'))).message ->> 'scheduled_at')::timestamptz, (pg_temp.att(pg_temp.cur('wait'))).scheduled_at,
          'workflow_start: its message carries scheduled_at');
SELECT is(pg_temp.read('wait', 'wait'), 0, 'workflow_start: a waiting first step is not read before its time');
SELECT is((pg_temp.w('wait')).status, 'ready', 'workflow_start: a run waiting for its first step is ready');

-- A step may name its own queue.
DO $d$ BEGIN PERFORM pg_temp.start('stepq', '[{"name": "a", "queue": "t_wfr_stepq_other"}]'); END $d$;
SELECT is((pg_temp.att(pg_temp.cur('stepq'))).queue, 't_wfr_stepq_other', 'workflow_start: a step''s own queue is used');
SELECT isnt(pg_temp.msg('t_wfr_stepq_other', (pg_temp.att(pg_temp.cur('stepq'))).msg_id), NULL,
            'workflow_start: the message is sent to the step''s queue');

-- arguments NULL is {}.
INSERT INTO t_runs SELECT 'nullargs', s.* FROM pgbus.workflow_start('t_wfr_start', arguments => NULL) s;
SELECT is((pg_temp.w('nullargs')).arguments, '{}'::jsonb, 'workflow_start: NULL arguments are {}');

-- rerun_of is stored and told by the started event.
INSERT INTO t_runs SELECT 'rerunof', s.* FROM pgbus.workflow_start('t_wfr_start', rerun_of => pg_temp.run('happy')) s;
SELECT is((pg_temp.w('rerunof')).rerun_of, pg_temp.run('happy'), 'workflow_start: rerun_of is stored');
SELECT is((pg_temp.ev('rerunof', 'started')).details, jsonb_build_object('rerun_of', pg_temp.run('happy')),
          'workflow_start: the started event of a rerun names the run it reruns');

-------------------------------------------------------------------------------------------------
-- workflow_start: refusals
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.mark('start_runs', to_jsonb((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfr_start'))); END $d$;
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_unregistered')$$, 'PB404',
                 'pgbus: workflow class t_wfr_unregistered is not registered', 'workflow_start: refuses an unregistered class');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_start', arguments => '[1]')$$, '22023',
                 'pgbus: workflow arguments must be a JSON object', 'workflow_start: refuses array arguments');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_start', arguments => '"x"')$$, '22023', NULL,
                 'workflow_start: refuses string arguments');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_start', arguments => 'null')$$, '22023', NULL,
                 'workflow_start: refuses JSON null arguments');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_start', 'User', NULL)$$, '22023',
                 'pgbus: a subject needs both a type and an id', 'workflow_start: refuses a subject type without an id');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_start', NULL, '42')$$, '22023',
                 'pgbus: a subject needs both a type and an id', 'workflow_start: refuses a subject id without a type');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfr_start'), (pg_temp.marked('start_runs'))::bigint,
          'workflow_start: refused starts create no run');

SELECT * FROM finish();
ROLLBACK;
