-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: workflow_stuck (classes t_wfc_st_*).
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(9);

-- Every scenario has its own class and queue ('t_wfc_<name>'), so that reading one scenario's
-- step begins no other.
CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfc_' || $1 $f$;
\ir ../include/workflow_helpers.psql
-- Registers t_wfc_<name> and starts a run of it, remembered as `name`.
CREATE FUNCTION pg_temp.start(name text, steps text, arguments jsonb DEFAULT '{}', subject_type text DEFAULT NULL,
                              subject_id text DEFAULT NULL) RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name), start.subject_type, start.subject_id, start.arguments,
                                              actor => 'tester');
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;
-- Reads the queue t_wfc_<queue> the way a worker does; keeps the rows under `tag`; how many
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
-- Everything that belongs to a run, to show that something changed nothing: its row, its
-- attempts, their messages (queue and archive), its event count, the runs that rerun it.
CREATE FUNCTION pg_temp.state(name text) RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
    run uuid := pg_temp.run(name);
    att record;
    m jsonb;
    msgs jsonb := '[]';
BEGIN
    FOR att IN SELECT ws.queue, ws.msg_id FROM pgbus.workflow_steps ws
               WHERE ws.workflow_id = run AND ws.msg_id IS NOT NULL ORDER BY ws.step_id LOOP
        EXECUTE format('SELECT jsonb_build_object(''q'', (SELECT to_jsonb(x) FROM pgmq.%I x WHERE x.msg_id = $1),
                                                  ''a'', (SELECT to_jsonb(y) FROM pgmq.%I y WHERE y.msg_id = $1))',
                       'q_' || att.queue, 'a_' || att.queue)
            INTO m USING att.msg_id;
        msgs := msgs || jsonb_build_array(m);
    END LOOP;
    RETURN jsonb_build_object(
        'run', (SELECT to_jsonb(w) FROM pgbus.workflows w WHERE w.workflow_id = run),
        'steps', (SELECT coalesce(jsonb_agg(to_jsonb(ws) ORDER BY ws.step_id), '[]')
                  FROM pgbus.workflow_steps ws WHERE ws.workflow_id = run),
        'events', (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = run),
        'reruns', (SELECT count(*) FROM pgbus.workflows w WHERE w.rerun_of = run),
        'messages', msgs);
END;
$f$;

-------------------------------------------------------------------------------------------------
-- workflow_stuck (classes t_wfc_st_*)
-------------------------------------------------------------------------------------------------
-- paused_error: a step failed.
DO $d$ BEGIN PERFORM pg_temp.go('st_error', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('st_error'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused', 'setup: st_error');
-- stalled: paused by the stall action.
DO $d$ BEGIN PERFORM pg_temp.go('st_stall', '[{"name": "a"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfc_st_stall', (pg_temp.att(pg_temp.cur('st_stall'))).msg_id, 0)$$, 'setup: st_stall message back');
SELECT is(pg_temp.read('st_stall_again', 'st_stall'), 1, 'setup: st_stall stalled');
-- stalled: running past its own timeout (60s), well within the threshold.
DO $d$ BEGIN PERFORM pg_temp.go('st_timeout', '[{"name": "a", "timeout": 60}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '2 minutes' WHERE step_id = pg_temp.cur('st_timeout');
-- stalled: running past the threshold (no timeout).
DO $d$ BEGIN PERFORM pg_temp.go('st_threshold', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('st_threshold');
-- healthy: running for 5 minutes; running 20 minutes with a timeout of an hour.
DO $d$ BEGIN PERFORM pg_temp.go('st_running_ok', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '5 minutes' WHERE step_id = pg_temp.cur('st_running_ok');
DO $d$ BEGIN PERFORM pg_temp.go('st_long_timeout', '[{"name": "a", "timeout": 3600}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('st_long_timeout');
-- paused_manual.
DO $d$ BEGIN PERFORM pg_temp.start('st_manual', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_manual', 'pause'); END $d$;
-- overdue: ready, due 10 minutes ago; healthy: due 2 minutes ago, due now.
DO $d$ BEGIN PERFORM pg_temp.start('st_overdue', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('st_overdue');
DO $d$ BEGIN PERFORM pg_temp.start('st_due', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '2 minutes' WHERE step_id = pg_temp.cur('st_due');
DO $d$ BEGIN PERFORM pg_temp.start('st_ready', '[{"name": "a"}]'); END $d$;
-- healthy: waiting, finished, cancelled.
DO $d$ BEGIN PERFORM pg_temp.start('st_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('st_waiting');
DO $d$ BEGIN PERFORM pg_temp.go('st_finished', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('st_finished'), 'finished') ->> 'status', 'finished', 'setup: st_finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '1 day' WHERE workflow_id = pg_temp.run('st_finished');
DO $d$ BEGIN PERFORM pg_temp.start('st_cancelled', '[{"name": "a"}]'); PERFORM pg_temp.cmd('st_cancelled', 'cancel'); END $d$;

SELECT set_eq(
    $$SELECT workflow_id, workflow_class, step_name, reason, error_class FROM pgbus.workflow_stuck()
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES (pg_temp.run('st_error'), 't_wfc_st_error', 'a', 'paused_error', 'app.Boom'),
             (pg_temp.run('st_stall'), 't_wfc_st_stall', 'a', 'stalled', 'pgbus.StepStalled'),
             (pg_temp.run('st_timeout'), 't_wfc_st_timeout', 'a', 'stalled', NULL),
             (pg_temp.run('st_threshold'), 't_wfc_st_threshold', 'a', 'stalled', NULL),
             (pg_temp.run('st_manual'), 't_wfc_st_manual', 'a', 'paused_manual', NULL),
             (pg_temp.run('st_overdue'), 't_wfc_st_overdue', 'a', 'overdue', NULL)$$,
    'workflow_stuck: each stuck run once with its reason (paused_error, stalled x3, paused_manual, overdue); healthy runs not');
SELECT results_eq(
    $$SELECT reason, since FROM pgbus.workflow_stuck() WHERE workflow_id IN (pg_temp.run('st_timeout'), pg_temp.run('st_overdue'))
      ORDER BY reason$$,
    $$VALUES ('overdue'::text, now() - interval '10 minutes'), ('stalled', now() - interval '2 minutes')$$,
    'workflow_stuck: since is when the step started (stalled) or was due (overdue)');
SELECT is((SELECT since FROM pgbus.workflow_stuck() WHERE workflow_id = pg_temp.run('st_manual')), (pg_temp.w('st_manual')).updated_at,
          'workflow_stuck: since is when a paused run was last updated');
SELECT set_eq(
    $$SELECT workflow_class, reason FROM pgbus.workflow_stuck(interval '30 minutes', interval '15 minutes')
      WHERE workflow_class LIKE 't\_wfc\_st\_%'$$,
    $$VALUES ('t_wfc_st_error', 'paused_error'), ('t_wfc_st_stall', 'stalled'), ('t_wfc_st_timeout', 'stalled'),
             ('t_wfc_st_manual', 'paused_manual')$$,
    'workflow_stuck: a longer threshold and overdue_after leave out the 20-minute step and the 10-minute-late one (own timeout still counts)');
SELECT set_eq(
    $$SELECT workflow_class, reason FROM pgbus.workflow_stuck(interval '4 minutes', interval '1 minute')
      WHERE workflow_class LIKE 't\_wfc\_st\_%' AND reason IN ('stalled', 'overdue')$$,
    $$VALUES ('t_wfc_st_stall', 'stalled'), ('t_wfc_st_timeout', 'stalled'), ('t_wfc_st_threshold', 'stalled'),
             ('t_wfc_st_running_ok', 'stalled'), ('t_wfc_st_overdue', 'overdue'), ('t_wfc_st_due', 'overdue')$$,
    'workflow_stuck: a shorter threshold and overdue_after take in the 5-minute step and the 2-minute-late one');

SELECT * FROM finish();
ROLLBACK;
