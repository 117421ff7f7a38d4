-- pgTAP tests for the workflow read layer (sql/views/020_workflow_read_layer.sql).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(10);

SELECT pgbus.workflow_register('t_wrl', '[{"name": "one"}, {"name": "two"}]', 'd1', 't_wrl');
CREATE TEMP TABLE t_run AS SELECT * FROM pgbus.workflow_start('t_wrl', 'User', '1', '{"a": 1}', actor => 'tester');
CREATE TEMP TABLE t_read AS SELECT * FROM pgbus.read_jobs(ARRAY['t_wrl'], 30, 1, 'host:1');
SELECT pgbus.workflow_end_step((SELECT (context ->> 'step_id')::bigint FROM t_read), 'pause', error => '{"class": "KeyError", "message": "boom"}');
SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'signal', 'ops', NULL, '{"name": "poke"}');

SELECT is((SELECT (status, pause_cause, current_step, current_step_status, current_attempt, current_error_class,
                   current_error_message, definition_outdated)::text
           FROM pgbus.workflow_runs_overview WHERE workflow_id = (SELECT workflow_id FROM t_run)),
          '(paused,error,one,failed,1,KeyError,boom,f)', 'runs overview: the run with its current step''s state');
SELECT is((SELECT count(*) FROM pgbus.workflow_runs_overview), (SELECT count(*) FROM pgbus.workflows),
          'runs overview: one row per run');
UPDATE pgbus.workflow_definitions SET digest = 'd2' WHERE workflow_class = 't_wrl';
SELECT is((SELECT definition_outdated FROM pgbus.workflow_runs_overview WHERE workflow_id = (SELECT workflow_id FROM t_run)), true,
          'runs overview: a run on an older definition is marked');
SELECT is((SELECT (workflow_class, step_name, status, worker)::text FROM pgbus.workflow_attempts
           WHERE workflow_id = (SELECT workflow_id FROM t_run)), '(t_wrl,one,failed,host:1)',
          'attempts: each attempt with its run''s class');
SELECT ok((SELECT duration >= interval '0' FROM pgbus.workflow_attempts WHERE workflow_id = (SELECT workflow_id FROM t_run)),
          'attempts: how long an ended attempt ran');
SELECT is((SELECT (workflow_class, name, status, actor)::text FROM pgbus.workflow_signal_log
           WHERE workflow_id = (SELECT workflow_id FROM t_run)), '(t_wrl,poke,pending,ops)',
          'signal log: each signal with its run''s class');
SELECT is((SELECT string_agg(event, ',' ORDER BY event_id) FROM pgbus.workflow_audit_trail
           WHERE workflow_id = (SELECT workflow_id FROM t_run)),
          'started,step_scheduled,step_started,step_failed,paused,signal_received',
          'audit trail: the run''s events in order');
SELECT is((SELECT DISTINCT workflow_class FROM pgbus.workflow_audit_trail WHERE workflow_id = (SELECT workflow_id FROM t_run)),
          't_wrl', 'audit trail: with the run''s class');
SELECT is((SELECT (array_agg(column_name::text ORDER BY ordinal_position))[1:2] FROM information_schema.columns
           WHERE table_schema = 'pgbus' AND table_name = 'workflow_attempts'),
          ARRAY['workflow_class', 'duration'], 'attempts: the view''s own columns come first, the table''s after');
SELECT is((SELECT count(*)::int FROM information_schema.columns WHERE table_schema = 'pgbus' AND table_name = 'workflow_attempts'),
          (SELECT count(*)::int + 2 FROM information_schema.columns WHERE table_schema = 'pgbus' AND table_name = 'workflow_steps'),
          'attempts: every column of workflow_steps');

SELECT * FROM finish();
ROLLBACK;
