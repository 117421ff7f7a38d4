-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: resume_at.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(11);

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
-- resume_at
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('ra', '[{"name": "a"}, {"name": "b"}, {"name": "g", "removed": true}, {"name": "c"}]'); END $d$;
INSERT INTO t_runs SELECT 'ra', s.* FROM pgbus.workflow_start('t_wfc_ra') s;
DO $d$ BEGIN PERFORM pg_temp.read('ra', 'ra'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('ra'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused', 'setup: a failed');
SELECT pg_temp.mark('ra_state', pg_temp.state('ra'));
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', NULL, '{"step": "zzz"}'),
          '{"ok": false, "code": "invalid", "status": "paused", "message": "t_wfc_ra has no step ''zzz''"}'::jsonb,
          'resume_at an unknown step: invalid');
SELECT is(pg_temp.state('ra'), pg_temp.marked('ra_state'), 'resume_at an unknown step: nothing changed');
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', NULL, '{}'),
          '{"ok": false, "code": "invalid", "status": "paused", "message": "t_wfc_ra has no step NULL"}'::jsonb,
          'resume_at without a step: invalid');
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', NULL, '{"step": "g"}') ->> 'code', 'invalid', 'resume_at a gravestone step: invalid');
SELECT is(pg_temp.state('ra'), pg_temp.marked('ra_state'), 'resume_at refusals: nothing changed');
SELECT pg_temp.mark('ra_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('ra', 'resume_at', 'ops', 'skip b', '{"step": "c"}'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume_at a named step: answers ok, ready');
SELECT is(pg_temp.attempts('ra'), 'a#1:failed,c#1:scheduled', 'resume_at a named step: that step is scheduled');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, w.current_step, pg_temp.recent(s.scheduled_at), pg_temp.has_amsg(s.step_id)
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = pg_temp.run('ra')$$,
    $$VALUES ('ready'::text, NULL::text, 'c'::text, true, true)$$,
    'resume_at a named step: the run is ready at it, scheduled now, with its message');
SELECT is(pg_temp.events('ra', (pg_temp.marked('ra_ev'))::bigint), 'resumed_at,step_scheduled', 'resume_at: events resumed_at, step_scheduled');
SELECT results_eq($$SELECT actor, reason, details FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('ra') AND event = 'resumed_at'$$,
                  $$VALUES ('ops'::text, 'skip b'::text, '{"step": "c"}'::jsonb)$$, 'resume_at: the event names the step, actor and reason');

SELECT * FROM finish();
ROLLBACK;
