-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: workflow_available_actions.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);

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
-- workflow_available_actions
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('aa_ready', '[{"name": "a"}]'); END $d$;
-- (Scheduled in an earlier transaction: due before now().)
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '1 second' WHERE step_id = pg_temp.cur('aa_ready');
DO $d$ BEGIN PERFORM pg_temp.start('aa_later', '[{"name": "a", "wait": 600}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.go('aa_running', '[{"name": "a"}]'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.start('aa_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('aa_waiting');
DO $d$ BEGIN PERFORM pg_temp.start('aa_paused', '[{"name": "a"}]'); PERFORM pg_temp.cmd('aa_paused', 'pause'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.go('aa_finished', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('aa_finished'), 'finished') ->> 'status', 'finished', 'setup: finished');
DO $d$ BEGIN PERFORM pg_temp.start('aa_cancelled', '[{"name": "a"}]'); PERFORM pg_temp.cmd('aa_cancelled', 'cancel'); END $d$;
SELECT results_eq(
    $$SELECT n, pgbus.workflow_available_actions(pg_temp.run(n))
      FROM unnest(ARRAY['aa_ready', 'aa_later', 'aa_running', 'aa_waiting', 'aa_paused', 'aa_finished', 'aa_cancelled']) WITH ORDINALITY u(n, i)
      ORDER BY i$$,
    $$VALUES ('aa_ready', '{reschedule,signal,pause,cancel}'::text[]),
             ('aa_later', '{run_now,reschedule,signal,pause,cancel}'),
             ('aa_running', '{signal,pause,cancel}'),
             ('aa_waiting', '{skip,signal,pause,cancel}'),
             ('aa_paused', '{resume,resume_at,signal,cancel}'),
             ('aa_finished', '{rerun}'),
             ('aa_cancelled', '{rerun}')$$,
    'workflow_available_actions: per status; run_now only when the scheduled step is in the future');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('aa_ready')), '{reschedule,signal,pause,cancel}'::text[],
          'workflow_available_actions: a ready run whose step is due has no run_now');
SELECT is(pgbus.workflow_available_actions(pg_temp.run('aa_later')), '{run_now,reschedule,signal,pause,cancel}'::text[],
          'workflow_available_actions: a ready run whose step is later has run_now');
SELECT is(pgbus.workflow_available_actions(gen_random_uuid()), '{}'::text[], 'workflow_available_actions: an unknown run has none');
-- Each offered action is accepted (not refused as not_allowed).
SELECT is((SELECT count(*) FROM unnest(ARRAY['aa_ready', 'aa_later', 'aa_running', 'aa_waiting', 'aa_paused', 'aa_finished', 'aa_cancelled']) n,
                 unnest(pgbus.workflow_available_actions(pg_temp.run(n))) v
           WHERE pgbus.workflow_transition('outside', v, (pg_temp.w(n)).status) IS NULL), 0::bigint,
          'workflow_available_actions: offers only verbs the transition table allows');

SELECT * FROM finish();
ROLLBACK;
