-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_start: one ongoing run per (class, subject).
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(20);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_start: one ongoing run per (class, subject)
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('subj', '[{"name": "a"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.reg('subj2', '[{"name": "a"}]'); END $d$;
INSERT INTO t_runs SELECT 'u1', s.* FROM pgbus.workflow_start('t_wfr_subj', 'User', '1') s;
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_subj', 'User', '1')$$, 'PB409', NULL,
                 'workflow_start: a second ongoing run for the same class and subject raises PB409');
SELECT lives_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_subj', 'User', '2')$$, 'workflow_start: another subject id may start');
SELECT lives_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_subj', 'Team', '1')$$, 'workflow_start: another subject type may start');
SELECT lives_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_subj2', 'User', '1')$$, 'workflow_start: another class may start for the subject');
SELECT is(pgbus.workflow_command(pg_temp.run('u1'), 'pause') ->> 'status', 'paused', 'setup: the subject''s run paused');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_subj', 'User', '1')$$, 'PB409', NULL,
                 'workflow_start: a paused run is ongoing (PB409)');
UPDATE pgbus.workflows SET status = 'waiting', pause_cause = NULL WHERE workflow_id = pg_temp.run('u1');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_start('t_wfr_subj', 'User', '1')$$, 'PB409', NULL,
                 'workflow_start: a waiting run is ongoing (PB409)');
UPDATE pgbus.workflows SET status = 'ready' WHERE workflow_id = pg_temp.run('u1');
SELECT is(pgbus.workflow_command(pg_temp.run('u1'), 'cancel') ->> 'status', 'cancelled', 'setup: the subject''s run cancelled');
INSERT INTO t_runs SELECT 'u1_after_cancel', s.* FROM pgbus.workflow_start('t_wfr_subj', 'User', '1') s;
SELECT isnt(pg_temp.run('u1_after_cancel'), NULL, 'workflow_start: after the subject''s run was cancelled a new one starts');
DO $d$ BEGIN PERFORM pg_temp.read('u1_after_cancel', 'subj'); END $d$;
SELECT is((pg_temp.att(pg_temp.cur('u1_after_cancel'))).status, 'running', 'setup: its step begun');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('u1_after_cancel'), 'finished') ->> 'status', 'finished',
          'setup: the subject''s second run finished');
INSERT INTO t_runs SELECT 'u1_after_finish', s.* FROM pgbus.workflow_start('t_wfr_subj', 'User', '1') s;
SELECT isnt(pg_temp.run('u1_after_finish'), NULL, 'workflow_start: after the subject''s run finished a new one starts');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfr_subj' AND subject_type = 'User' AND subject_id = '1'),
          3::bigint, 'workflow_start: the subject has three runs, one ongoing');
SELECT is((SELECT count(DISTINCT s.workflow_id)
           FROM generate_series(1, 3) g, LATERAL pgbus.workflow_start('t_wfr_subj', arguments => jsonb_build_object('i', g)) s), 3::bigint,
          'workflow_start: subject-less runs are not limited');

SELECT has_index('pgbus', 'workflows', 'workflows_one_ongoing_per_subject', ARRAY['workflow_class', 'subject_type', 'subject_id'],
                 'the index workflows_one_ongoing_per_subject is on (workflow_class, subject_type, subject_id)');
SELECT index_is_unique('pgbus', 'workflows', 'workflows_one_ongoing_per_subject', 'workflows_one_ongoing_per_subject is unique');
SELECT ok((SELECT i.indpred IS NOT NULL FROM pg_index i WHERE i.indexrelid = 'pgbus.workflows_one_ongoing_per_subject'::regclass),
          'workflows_one_ongoing_per_subject is partial');
SELECT matches((SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
                WHERE i.indexrelid = 'pgbus.workflows_one_ongoing_per_subject'::regclass),
               'subject_id IS NOT NULL\) AND \(ended_at IS NULL',
               'workflows_one_ongoing_per_subject covers the ongoing runs (not ended: ready, running, waiting, paused)');
SELECT throws_ok(format($$INSERT INTO pgbus.workflows (workflow_class, subject_type, subject_id, definition_digest)
                          VALUES ('t_wfr_subj', 'User', '1', 'd1')$$), '23505', NULL,
                 'workflows_one_ongoing_per_subject: a second ongoing row is refused by the index');
SELECT lives_ok($$INSERT INTO pgbus.workflows (workflow_class, subject_type, subject_id, definition_digest, status, ended_at)
                  VALUES ('t_wfr_subj', 'User', '1', 'd1', 'finished', now())$$,
                'workflows_one_ongoing_per_subject: an ended row for the same subject is not covered');

SELECT * FROM finish();
ROLLBACK;
