-- pgTAP tests for sql/functions/080-084_workflow_command_*.sql: run_now, reschedule.
-- (Split from workflow_commands.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(19);

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
-- run_now, reschedule
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('rn', '[{"name": "a", "wait": 3600}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.read('rn_before', 'rn'), 0, 'setup: the step is not due for an hour');
SELECT pg_temp.mark('rn_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('rn', 'run_now', 'ops', 'hurry'), '{"ok": true, "status": "ready"}'::jsonb, 'run_now: answers ok, ready');
SELECT results_eq(
    $$SELECT pg_temp.recent(s.scheduled_at), (pg_temp.amsg(s.step_id)).vt <= clock_timestamp(), s.attempt, s.status
      FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('rn')$$,
    $$VALUES (true, true, 1, 'scheduled'::text)$$, 'run_now: the same attempt is scheduled now and its message visible now');
SELECT is(pg_temp.events('rn', (pg_temp.marked('rn_ev'))::bigint), 'run_now', 'run_now: a run_now event');
SELECT results_eq($$SELECT actor, reason, details ->> 'step', (details ->> 'scheduled_at')::timestamptz
                    FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rn') AND event = 'run_now'$$,
                  $$VALUES ('ops'::text, 'hurry'::text, 'a'::text, (pg_temp.att(pg_temp.cur('rn'))).scheduled_at)$$,
                  'run_now: the event names the step and the new time');
SELECT is(pg_temp.read('rn', 'rn'), 1, 'run_now: the step is read now');
SELECT is(pg_temp.ctx('rn') ->> 'step_name', 'a', 'run_now: ... step a begins');

DO $d$ BEGIN PERFORM pg_temp.start('rs', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT pg_temp.mark('rs_state', pg_temp.state('rs'));
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', NULL, '{}'),
          '{"ok": false, "code": "invalid", "status": "ready", "message": "reschedule needs a time: {\"at\": \"<ISO 8601 timestamp>\"}"}'::jsonb,
          'reschedule without at: invalid');
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', NULL, '{"at": null}') ->> 'code', 'invalid', 'reschedule with a null at: invalid');
SELECT is(pg_temp.state('rs'), pg_temp.marked('rs_state'), 'reschedule refusals: nothing changed');
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', NULL, '{"at": "not a time"}') - 'message',
          '{"ok": false, "code": "invalid", "status": "ready"}'::jsonb,
          'reschedule with an at that is not a time: a refusal (invalid), not an error');
SELECT is(pg_temp.state('rs'), pg_temp.marked('rs_state'), 'reschedule with an at that is not a time: nothing changed');
SELECT pg_temp.mark('rs_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('rs', 'reschedule', 'ops', 'later', jsonb_build_object('at', now() + interval '2 hours')),
          '{"ok": true, "status": "ready"}'::jsonb, 'reschedule: answers ok, ready');
SELECT results_eq(
    $$SELECT s.scheduled_at, (pg_temp.amsg(s.step_id)).vt, s.attempt FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('rs')$$,
    $$VALUES (now() + interval '2 hours', now() + interval '2 hours', 1)$$,
    'reschedule: the same attempt is scheduled at the time and its message hidden until then');
SELECT is(pg_temp.events('rs', (pg_temp.marked('rs_ev'))::bigint), 'rescheduled', 'reschedule: a rescheduled event');
SELECT results_eq($$SELECT actor, reason, details ->> 'step', (details ->> 'scheduled_at')::timestamptz
                    FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('rs') AND event = 'rescheduled'$$,
                  $$VALUES ('ops'::text, 'later'::text, 'a'::text, now() + interval '2 hours')$$,
                  'reschedule: the event names the step and the time');
SELECT is(pg_temp.read('rs_later', 'rs'), 0, 'reschedule: the step is not read before its time');
SELECT is(pg_temp.cmd('rs', 'reschedule', NULL, NULL, jsonb_build_object('at', now() - interval '1 hour')) ->> 'ok', 'true',
          'reschedule to a past time');
SELECT results_eq(
    $$SELECT s.scheduled_at, (pg_temp.amsg(s.step_id)).vt <= clock_timestamp() FROM pgbus.workflow_steps s WHERE s.step_id = pg_temp.cur('rs')$$,
    $$VALUES (now() - interval '1 hour', true)$$, 'reschedule to a past time: scheduled then, message visible now');

SELECT * FROM finish();
ROLLBACK;
