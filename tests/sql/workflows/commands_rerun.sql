-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: rerun.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(16);
\ir ../include/workflow_commands_setup.psql
-------------------------------------------------------------------------------------------------
-- rerun
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('rr', '[{"name": "a"}, {"name": "b"}]', '{"z": 1}', 'Account', '9'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.read('rr', 'rr'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('rr'), 'finished') ->> 'status', 'finished', 'setup: the run finished');
SELECT pg_temp.mark('rr_ev', to_jsonb(pg_temp.last_event_id()));
SELECT pg_temp.mark('rr_answer', pg_temp.cmd('rr', 'rerun', 'ops', 'again'));
SELECT is(pg_temp.marked('rr_answer') - 'workflow_id', '{"ok": true, "status": "finished"}'::jsonb, 'rerun: answers ok, finished');
INSERT INTO t_runs SELECT 'rr_new', (pg_temp.marked('rr_answer') ->> 'workflow_id')::uuid, NULL;
SELECT isnt(pg_temp.run('rr_new'), NULL, 'rerun: answers the new run''s workflow_id');
SELECT isnt(pg_temp.run('rr_new'), pg_temp.run('rr'), 'rerun: ... a new run');
SELECT results_eq(
    $$SELECT workflow_class, subject_type, subject_id, arguments, status, rerun_of, current_step
      FROM pgbus.workflows WHERE workflow_id = pg_temp.run('rr_new')$$,
    $$VALUES ('t_wfc_rr'::text, 'Account'::text, '9'::text, '{"z": 1}'::jsonb, 'ready'::text, pg_temp.run('rr'), 'a'::text)$$,
    'rerun: the new run has the class, subject and arguments, rerun_of the old run, and is ready at the first step');
SELECT is(pg_temp.attempts('rr_new'), 'a#1:scheduled', 'rerun: the new run''s first step is scheduled');
SELECT is((pg_temp.w('rr')).status, 'finished', 'rerun: the old run stays finished');
SELECT is(pg_temp.events('rr', (pg_temp.marked('rr_ev'))::bigint), 'rerun', 'rerun: a rerun event on the old run');
SELECT results_eq($$SELECT actor, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rr') AND event = 'rerun'$$,
                  $$VALUES ('ops'::text, 'again'::text, jsonb_build_object('workflow_id', pg_temp.run('rr_new')))$$,
                  'rerun: the rerun event names the new run, with actor and reason');
SELECT results_eq($$SELECT actor, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rr_new') AND event = 'started'$$,
                  $$VALUES ('ops'::text, jsonb_build_object('rerun_of', pg_temp.run('rr')))$$,
                  'rerun: the new run''s started event names the old run');
-- The subject now has an ongoing run (the rerun): a second rerun is refused.
SELECT pg_temp.mark('rr_state', pg_temp.state('rr'));
SELECT pg_temp.mark('rr_count', to_jsonb((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfc_rr')));
SELECT is(pg_temp.cmd('rr', 'rerun', 'ops'),
          '{"ok": false, "code": "already_running", "status": "finished", "message": "the subject already has an ongoing run"}'::jsonb,
          'rerun while the subject has an ongoing run: already_running');
SELECT is(pg_temp.state('rr'), pg_temp.marked('rr_state'), 'rerun refused: nothing changed on the old run');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfc_rr'), (pg_temp.marked('rr_count'))::bigint,
          'rerun refused: no new run');
-- A cancelled run may be rerun too.
DO $d$ BEGIN PERFORM pg_temp.start('rr_c', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.cmd('rr_c', 'cancel') ->> 'status', 'cancelled', 'setup: cancelled');
SELECT is(pg_temp.cmd('rr_c', 'rerun') - 'workflow_id', '{"ok": true, "status": "cancelled"}'::jsonb,
          'rerun of a cancelled run: answers ok, cancelled');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE rerun_of = pg_temp.run('rr_c') AND status = 'ready'), 1::bigint,
          'rerun of a cancelled run: a new ready run');

SELECT * FROM finish();
ROLLBACK;
