-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_start: one ongoing run per (class, subject).
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(20);

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
