-- pgTAP tests for the outside verbs and the dispatcher's duty (sql/functions/080_workflow_commands.sql):
-- pgbus.workflow_command (every verb and refusal), workflow_available_actions, workflow_stuck,
-- workflow_sweep.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(175);

-- Every scenario has its own class and queue ('t_wfc_<name>'), so that reading one scenario's
-- step begins no other.
CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfc_' || $1 $f$;
\ir include/workflow_helpers.psql
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
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'workflow_command', ARRAY['uuid', 'text', 'text', 'text', 'jsonb'],
                    'pgbus.workflow_command(uuid, text, text, text, jsonb) exists');
SELECT has_function('pgbus', 'workflow_available_actions', ARRAY['uuid'], 'pgbus.workflow_available_actions(uuid) exists');
SELECT has_function('pgbus', 'workflow_stuck', ARRAY['interval', 'interval', 'interval'], 'pgbus.workflow_stuck(interval, interval, interval) exists');
SELECT has_function('pgbus', 'workflow_sweep', ARRAY['interval', 'text', 'interval', 'interval', 'interval', 'interval'],
                    'pgbus.workflow_sweep(interval, text, interval, interval, interval, interval) exists');

-------------------------------------------------------------------------------------------------
-- Unknown verbs and runs.
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('verbs', '[{"name": "a"}]'); END $d$;
SELECT pg_temp.mark('verbs_state', pg_temp.state('verbs'));
SELECT is(pg_temp.cmd('verbs', 'explode'),
          '{"ok": false, "code": "invalid", "message": "''explode'' is not a workflow action"}'::jsonb,
          'workflow_command: an unknown verb is invalid');
SELECT is(pg_temp.cmd('verbs', NULL) ->> 'code', 'invalid', 'workflow_command: a NULL verb is invalid');
SELECT is(pg_temp.cmd('verbs', 'complete') ->> 'code', 'invalid', 'workflow_command: a runner verb is invalid from outside');
SELECT is(pg_temp.state('verbs'), pg_temp.marked('verbs_state'), 'workflow_command: an invalid verb changes nothing');
SELECT is(pgbus.workflow_command(gen_random_uuid(), 'pause'), '{"ok": false, "code": "not_found"}'::jsonb,
          'workflow_command: an unknown run is not_found');
SELECT is(pgbus.workflow_command(NULL, 'cancel'), '{"ok": false, "code": "not_found"}'::jsonb,
          'workflow_command: a NULL run is not_found');

-------------------------------------------------------------------------------------------------
-- pause
-------------------------------------------------------------------------------------------------
-- On a ready run: its scheduled attempt is superseded and its message deleted.
DO $d$ BEGIN PERFORM pg_temp.start('p_ready', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT pg_temp.mark('p_ready_a', to_jsonb(pg_temp.cur('p_ready')));
SELECT pg_temp.mark('p_ready_msg', to_jsonb((pg_temp.att(pg_temp.cur('p_ready'))).msg_id));
SELECT pg_temp.mark('p_ready_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('p_ready', 'pause', 'ops', 'maintenance'), '{"ok": true, "status": "paused"}'::jsonb,
          'pause on a ready run: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause, current_step_id FROM pgbus.workflows WHERE workflow_id = pg_temp.run('p_ready')$$,
                  $$VALUES ('paused'::text, 'manual'::text, (pg_temp.marked('p_ready_a'))::bigint)$$,
                  'pause on a ready run: the run is paused (manual)');
SELECT results_eq($$SELECT status, ended_at IS NOT NULL FROM pgbus.workflow_steps WHERE step_id = (pg_temp.marked('p_ready_a'))::bigint$$,
                  $$VALUES ('superseded'::text, true)$$, 'pause on a ready run: the scheduled attempt is superseded');
SELECT is(pg_temp.has_msg('t_wfc_p_ready', (pg_temp.marked('p_ready_msg'))::bigint), false,
          'pause on a ready run: its message is deleted from the queue');
SELECT is(pg_temp.has_msg('t_wfc_p_ready', (pg_temp.marked('p_ready_msg'))::bigint, 'a'), false,
          'pause on a ready run: ... not archived');
SELECT is(pg_temp.read('p_ready', 'p_ready'), 0, 'pause on a ready run: nothing is left to read');
SELECT is(pg_temp.events('p_ready', (pg_temp.marked('p_ready_ev'))::bigint), 'paused', 'pause on a ready run: a paused event');
SELECT results_eq($$SELECT step_id, actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('p_ready') AND event = 'paused'$$,
                  $$VALUES ((pg_temp.marked('p_ready_a'))::bigint, 'ops'::text, 'maintenance'::text)$$,
                  'pause: the paused event has the attempt, actor and reason');

-- On a running run: the attempt carries on.
DO $d$ BEGIN PERFORM pg_temp.go('p_running', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.cmd('p_running', 'pause', 'ops'), '{"ok": true, "status": "paused"}'::jsonb, 'pause on a running run: answers ok, paused');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('p_running')$$,
                  $$VALUES ('paused'::text, 'manual'::text)$$, 'pause on a running run: the run is paused (manual)');
SELECT is(pg_temp.attempts('p_running'), 'a#1:running', 'pause on a running run: the attempt keeps running');
SELECT is(pg_temp.has_amsg(pg_temp.cur('p_running')), true, 'pause on a running run: its message stays');

-- On a waiting run.
DO $d$ BEGIN PERFORM pg_temp.start('p_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('p_waiting');
SELECT is(pg_temp.cmd('p_waiting', 'pause'), '{"ok": true, "status": "paused"}'::jsonb, 'pause on a waiting run: answers ok, paused');

-------------------------------------------------------------------------------------------------
-- cancel
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('c_ready', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT pg_temp.mark('c_ready_msg', to_jsonb((pg_temp.att(pg_temp.cur('c_ready'))).msg_id));
SELECT pg_temp.mark('c_ready_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('c_ready', 'cancel', 'ops', 'wrong customer'), '{"ok": true, "status": "cancelled"}'::jsonb,
          'cancel on a ready run: answers ok, cancelled');
SELECT results_eq($$SELECT status, pause_cause, pg_temp.recent(ended_at) FROM pgbus.workflows WHERE workflow_id = pg_temp.run('c_ready')$$,
                  $$VALUES ('cancelled'::text, NULL::text, true)$$, 'cancel on a ready run: the run is cancelled, ended now');
SELECT is(pg_temp.attempts('c_ready'), 'a#1:superseded', 'cancel on a ready run: the scheduled attempt is superseded');
SELECT is(pg_temp.has_msg('t_wfc_c_ready', (pg_temp.marked('c_ready_msg'))::bigint), false, 'cancel on a ready run: its message is deleted');
SELECT is(pg_temp.events('c_ready', (pg_temp.marked('c_ready_ev'))::bigint), 'cancelled', 'cancel: a cancelled event');
SELECT results_eq($$SELECT step_id, actor, reason FROM pgbus.workflow_events WHERE workflow_id = pg_temp.run('c_ready') AND event = 'cancelled'$$,
                  $$VALUES (NULL::bigint, 'ops'::text, 'wrong customer'::text)$$, 'cancel: the cancelled event has actor and reason');

DO $d$ BEGIN PERFORM pg_temp.go('c_running', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.cmd('c_running', 'cancel'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel on a running run: answers ok, cancelled');
SELECT is(pg_temp.attempts('c_running'), 'a#1:running', 'cancel on a running run: the attempt is left to end (its end is refused)');

DO $d$ BEGIN PERFORM pg_temp.start('c_paused', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.cmd('c_paused', 'pause') ->> 'status', 'paused', 'setup: paused');
SELECT is(pg_temp.cmd('c_paused', 'cancel'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel on a paused run: answers ok, cancelled');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('c_paused')$$,
                  $$VALUES ('cancelled'::text, NULL::text)$$, 'cancel on a paused run: cancelled, no pause cause');

DO $d$ BEGIN PERFORM pg_temp.start('c_waiting', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflows SET status = 'waiting' WHERE workflow_id = pg_temp.run('c_waiting');
SELECT is(pg_temp.cmd('c_waiting', 'cancel'), '{"ok": true, "status": "cancelled"}'::jsonb, 'cancel on a waiting run: answers ok, cancelled');

-------------------------------------------------------------------------------------------------
-- resume
-------------------------------------------------------------------------------------------------
-- After a failed step: the same step again, attempt + 1.
DO $d$ BEGIN PERFORM pg_temp.go('r_failed', '[{"name": "a", "timeout": 45}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_failed'), 'pause', error => '{"class": "app.Boom"}') ->> 'status', 'paused',
          'setup: step a failed and paused the run');
SELECT pg_temp.mark('r_failed_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('r_failed', 'resume', 'ops', 'fixed'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume after a failed step: answers ok, ready');
SELECT is(pg_temp.attempts('r_failed'), 'a#1:failed,a#2:scheduled', 'resume after a failed step: the same step again, attempt 2');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, w.current_step, pg_temp.recent(s.scheduled_at), s.timeout,
             (pg_temp.amsg(s.step_id)).vt <= clock_timestamp()
      FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('r_failed')$$,
    $$VALUES ('ready'::text, NULL::text, 'a'::text, true, interval '45 seconds', true)$$,
    'resume after a failed step: ready, attempt 2 current, scheduled now with its timeout, message visible');
SELECT is(pg_temp.events('r_failed', (pg_temp.marked('r_failed_ev'))::bigint), 'resumed,step_scheduled',
          'resume: events resumed, step_scheduled');
SELECT results_eq(
    $$SELECT event, actor, reason, details ->> 'step' FROM pgbus.workflow_events
      WHERE workflow_id = pg_temp.run('r_failed') AND event_id > (pg_temp.marked('r_failed_ev'))::bigint ORDER BY event_id$$,
    $$VALUES ('resumed'::text, 'ops'::text, 'fixed'::text, 'a'::text), ('step_scheduled', 'ops', NULL, 'a')$$,
    'resume: the events have the actor (and the reason on resumed)');
SELECT is(pg_temp.read('r_failed_again', 'r_failed'), 1, 'resume: the step is read again');
SELECT is((pg_temp.ctx('r_failed_again') ->> 'attempt')::int, 2, 'resume: ... as attempt 2');

-- After a step completed while the run was paused: the next step.
DO $d$ BEGIN PERFORM pg_temp.go('r_completed', '[{"name": "a"}, {"name": "b", "wait": 60}]'); END $d$;
SELECT is(pg_temp.cmd('r_completed', 'pause') ->> 'status', 'paused', 'setup: paused while a ran');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_completed'), 'complete') ->> 'status', 'paused', 'setup: a completed, the run stays paused');
SELECT is(pg_temp.cmd('r_completed', 'resume'), '{"ok": true, "status": "ready"}'::jsonb,
          'resume after a completed step: answers ok, ready');
SELECT is(pg_temp.attempts('r_completed'), 'a#1:completed,b#1:scheduled', 'resume after a completed step: the next step is scheduled');
SELECT is(pg_temp.recent((pg_temp.att(pg_temp.cur('r_completed'))).scheduled_at, interval '60 seconds'), true,
          'resume after a completed step: ... after its wait');

DO $d$ BEGIN PERFORM pg_temp.go('r_skipped', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.cmd('r_skipped', 'pause') ->> 'status', 'paused', 'setup: paused while a ran');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_skipped'), 'skip') ->> 'status', 'paused', 'setup: a skipped, the run stays paused');
SELECT is(pg_temp.cmd('r_skipped', 'resume') ->> 'status', 'ready', 'resume after a skipped step: ready');
SELECT is(pg_temp.attempts('r_skipped'), 'a#1:skipped,b#1:scheduled', 'resume after a skipped step: the next step is scheduled');

DO $d$ BEGIN PERFORM pg_temp.go('r_last', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.cmd('r_last', 'pause') ->> 'status', 'paused', 'setup: paused while the last step ran');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_last'), 'complete') ->> 'status', 'paused', 'setup: the last step completed');
SELECT is(pg_temp.cmd('r_last', 'resume'), '{"ok": true, "status": "finished"}'::jsonb,
          'resume after the last step completed: the run finishes');
SELECT results_eq($$SELECT status, pause_cause, ended_at IS NOT NULL FROM pgbus.workflows WHERE workflow_id = pg_temp.run('r_last')$$,
                  $$VALUES ('finished'::text, NULL::text, true)$$, 'resume after the last step completed: finished, ended');

-- While the attempt is still running: the run is running again, nothing scheduled.
SELECT pg_temp.mark('p_running_ev', to_jsonb(pg_temp.last_event_id()));
SELECT is(pg_temp.cmd('p_running', 'resume', 'ops'), '{"ok": true, "status": "running"}'::jsonb,
          'resume while the attempt still runs: answers ok, running');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('p_running')$$,
                  $$VALUES ('running'::text, NULL::text)$$, 'resume while the attempt still runs: the run is running');
SELECT is(pg_temp.attempts('p_running'), 'a#1:running', 'resume while the attempt still runs: nothing is scheduled');
SELECT is(pg_temp.events('p_running', (pg_temp.marked('p_running_ev'))::bigint), 'resumed',
          'resume while the attempt still runs: only a resumed event');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('p_running'), 'complete') ->> 'status', 'ready',
          'resume while the attempt still runs: the step then ends normally');
SELECT is(pg_temp.attempts('p_running'), 'a#1:completed,b#1:scheduled', 'resume while the attempt still runs: ... and the run goes on');

-- After a pause on a ready run (its attempt superseded): the same step again.
SELECT is(pg_temp.cmd('p_ready', 'resume') ->> 'status', 'ready', 'resume after a pause on a ready run: ready');
SELECT is(pg_temp.attempts('p_ready'), 'a#1:superseded,a#2:scheduled', 'resume after a pause on a ready run: the step again, attempt 2');
SELECT is(pg_temp.has_amsg(pg_temp.cur('p_ready')), true, 'resume after a pause on a ready run: with a new message');

-- After a step paused the run (interrupted).
DO $d$ BEGIN PERFORM pg_temp.go('r_interrupted', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('r_interrupted'), 'pause') ->> 'status', 'paused', 'setup: the step paused the run');
SELECT is(pg_temp.cmd('r_interrupted', 'resume') ->> 'status', 'ready', 'resume after a step paused the run: ready');
SELECT is(pg_temp.attempts('r_interrupted'), 'a#1:interrupted,a#2:scheduled', 'resume after a step paused the run: the step again');

-- After a stall (its worker died; stall action pause).
DO $d$ BEGIN PERFORM pg_temp.go('r_stalled', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT lives_ok($$SELECT pgmq.set_vt('t_wfc_r_stalled', (pg_temp.att(pg_temp.cur('r_stalled'))).msg_id, 0)$$, 'setup: the message comes back');
SELECT is(pg_temp.read('r_stalled_again', 'r_stalled'), 1, 'setup: read again: stalled');
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('r_stalled')$$,
                  $$VALUES ('paused'::text, 'stall'::text)$$, 'setup: the run is paused by the stall');
SELECT is(pg_temp.cmd('r_stalled', 'resume') ->> 'status', 'ready', 'resume after a stall: ready');
SELECT is(pg_temp.attempts('r_stalled'), 'a#1:stalled,a#2:scheduled', 'resume after a stall: the step again');

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

-------------------------------------------------------------------------------------------------
-- workflow_sweep (from no runs at all, so that its counts are exact; undone by the ROLLBACK)
-------------------------------------------------------------------------------------------------
DELETE FROM pgbus.workflows;
SELECT is(pgbus.workflow_sweep(), '{"stalled": [], "timed_out": [], "resolved": 0, "resent": 0, "deleted": 0, "failures_forgotten": 0,
                                     "moved": [], "failed": [], "runs": [], "stuck": []}'::jsonb,
          'workflow_sweep: with no runs it does nothing and answers empty gauges');

-- To stall: past the threshold; past its timeout; paused by an operator while running past the threshold.
DO $d$ BEGIN PERFORM pg_temp.go('sw_stall', '[{"name": "a"}, {"name": "b"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_stall');
DO $d$ BEGIN PERFORM pg_temp.go('sw_timeout', '[{"name": "a", "timeout": 60}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '2 minutes' WHERE step_id = pg_temp.cur('sw_timeout');
DO $d$ BEGIN PERFORM pg_temp.go('sw_paused', '[{"name": "a"}]'); PERFORM pg_temp.cmd('sw_paused', 'pause'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_paused');
-- Not to stall: running for a minute.
DO $d$ BEGIN PERFORM pg_temp.go('sw_fresh', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '1 minute' WHERE step_id = pg_temp.cur('sw_fresh');
-- To resend: due 10 minutes ago, its message lost. Not to resend: its message is there; lost but due only now.
DO $d$ BEGIN PERFORM pg_temp.start('sw_lost', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('sw_lost');
SELECT pg_temp.mark('sw_lost_msg', to_jsonb((pg_temp.att(pg_temp.cur('sw_lost'))).msg_id));
SELECT is(pgmq.delete('t_wfc_sw_lost', (pg_temp.marked('sw_lost_msg'))::bigint), true, 'setup: sw_lost''s message is lost');
DO $d$ BEGIN PERFORM pg_temp.start('sw_kept', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '10 minutes' WHERE step_id = pg_temp.cur('sw_kept');
SELECT pg_temp.mark('sw_kept_msg', to_jsonb((pg_temp.att(pg_temp.cur('sw_kept'))).msg_id));
DO $d$ BEGIN PERFORM pg_temp.start('sw_recent', '[{"name": "a"}]'); END $d$;
SELECT is(pgmq.delete('t_wfc_sw_recent', (pg_temp.att(pg_temp.cur('sw_recent'))).msg_id), true, 'setup: sw_recent''s message is lost');
-- To delete: finished 40 days ago, cancelled 40 days ago. To keep: finished 10 days ago; paused long ago.
DO $d$ BEGIN PERFORM pg_temp.go('sw_old_fin', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('sw_old_fin'), 'finished') ->> 'status', 'finished', 'setup: sw_old_fin finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '40 days' WHERE workflow_id = pg_temp.run('sw_old_fin');
DO $d$ BEGIN PERFORM pg_temp.start('sw_old_can', '[{"name": "a"}]'); PERFORM pg_temp.cmd('sw_old_can', 'cancel'); END $d$;
UPDATE pgbus.workflows SET ended_at = now() - interval '40 days' WHERE workflow_id = pg_temp.run('sw_old_can');
DO $d$ BEGIN PERFORM pg_temp.go('sw_young_fin', '[{"name": "a"}]'); END $d$;
SELECT is(pgbus.workflow_end_step(pg_temp.cur('sw_young_fin'), 'finished') ->> 'status', 'finished', 'setup: sw_young_fin finished');
UPDATE pgbus.workflows SET ended_at = now() - interval '10 days' WHERE workflow_id = pg_temp.run('sw_young_fin');
DO $d$ BEGIN PERFORM pg_temp.start('sw_old_paused', '[{"name": "a"}]'); PERFORM pg_temp.cmd('sw_old_paused', 'pause'); END $d$;
UPDATE pgbus.workflows SET created_at = now() - interval '90 days', updated_at = now() - interval '90 days'
WHERE workflow_id = pg_temp.run('sw_old_paused');
-- A rerun of the run to delete outlives it.
INSERT INTO t_runs SELECT 'sw_child', (pg_temp.cmd('sw_old_fin', 'rerun') ->> 'workflow_id')::uuid, NULL;
SELECT isnt(pg_temp.run('sw_child'), NULL, 'setup: sw_old_fin rerun');
SELECT pg_temp.mark('sw_old_fin_steps', to_jsonb((SELECT array_agg(step_id) FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('sw_old_fin'))));
SELECT pg_temp.mark('sw_ev', to_jsonb(pg_temp.last_event_id()));

SELECT pg_temp.mark('sweep1', pgbus.workflow_sweep());
SELECT set_eq(
    $$SELECT e - 'was' - 'status' - 'error_class' FROM jsonb_array_elements(pg_temp.marked('sweep1') -> 'stalled') e$$,
    $$VALUES (jsonb_build_object('workflow_id', pg_temp.run('sw_stall'), 'workflow_class', 't_wfc_sw_stall', 'step', 'a', 'action', 'pause')),
             (jsonb_build_object('workflow_id', pg_temp.run('sw_timeout'), 'workflow_class', 't_wfc_sw_timeout', 'step', 'a', 'action', 'pause')),
             (jsonb_build_object('workflow_id', pg_temp.run('sw_paused'), 'workflow_class', 't_wfc_sw_paused', 'step', 'a', 'action', 'pause'))$$,
    'workflow_sweep: "stalled" lists the runs it stalled, with step and action');
SELECT is(pg_temp.marked('sweep1') -> 'resent', '1'::jsonb, 'workflow_sweep: "resent" counts one lost message sent again');
SELECT is(pg_temp.marked('sweep1') -> 'deleted', '2'::jsonb, 'workflow_sweep: "deleted" counts two old ended runs');

-- Stalls.
SELECT results_eq($$SELECT status, pause_cause FROM pgbus.workflows WHERE workflow_id = pg_temp.run('sw_stall')$$,
                  $$VALUES ('paused'::text, 'stall'::text)$$, 'workflow_sweep: a step past the threshold: the run is paused (stall)');
SELECT results_eq(
    $$SELECT status, outcome, error_class, error ->> 'message', ended_at IS NOT NULL FROM pgbus.workflow_steps WHERE step_id = pg_temp.cur('sw_stall')$$,
    $$VALUES ('stalled'::text, 'pause'::text, 'pgbus.StepStalled'::text, 'step a ran longer than the stall threshold'::text, true)$$,
    'workflow_sweep: ... its attempt is stalled (ran longer than the stall threshold)');
SELECT results_eq(
    $$SELECT event, actor, details FROM pgbus.workflow_events
      WHERE workflow_id = pg_temp.run('sw_stall') AND event_id > (pg_temp.marked('sw_ev'))::bigint ORDER BY event_id$$,
    $$VALUES ('stall_detected'::text, 'pgbus'::text, '{"detection": "sweep", "action": "pause", "step": "a"}'::jsonb),
             ('paused', 'pgbus', '{}')$$,
    'workflow_sweep: ... events stall_detected (detection sweep) and paused, by pgbus');
SELECT results_eq(
    $$SELECT w.status, s.status, s.error ->> 'message' FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_timeout')$$,
    $$VALUES ('paused'::text, 'stalled'::text, 'step a ran longer than 00:01:00'::text)$$,
    'workflow_sweep: a step past its own timeout is stalled too');
SELECT results_eq(
    $$SELECT w.status, w.pause_cause, s.status FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
      WHERE w.workflow_id = pg_temp.run('sw_paused')$$,
    $$VALUES ('paused'::text, 'manual'::text, 'stalled'::text)$$,
    'workflow_sweep: on a run paused by an operator the attempt is stalled and the run stays paused (manual)');
SELECT is(pg_temp.attempts('sw_fresh'), 'a#1:running', 'workflow_sweep: a step running for a minute is left alone');
SELECT is((pg_temp.w('sw_fresh')).status, 'running', 'workflow_sweep: ... its run still running');

-- Resends.
SELECT isnt((pg_temp.att(pg_temp.cur('sw_lost'))).msg_id, (pg_temp.marked('sw_lost_msg'))::bigint,
            'workflow_sweep: a lost message is sent again with a new msg_id');
SELECT results_eq(
    $$SELECT (m).message ->> 'job_class', (m).message -> 'kwargs', (m).vt <= clock_timestamp()
      FROM (SELECT pg_temp.amsg(pg_temp.cur('sw_lost')) AS m) x$$,
    $$VALUES (pgbus.step_job_class(), jsonb_build_object('workflow_id', pg_temp.run('sw_lost'), 'step_id', pg_temp.cur('sw_lost')), true)$$,
    'workflow_sweep: ... the new message is the StepJob of the same attempt, visible now');
SELECT is(pg_temp.attempts('sw_lost'), 'a#1:scheduled', 'workflow_sweep: ... the same attempt, no new one');
SELECT results_eq($$SELECT event, actor, reason, details FROM pgbus.workflow_events
                    WHERE workflow_id = pg_temp.run('sw_lost') AND event_id > (pg_temp.marked('sw_ev'))::bigint$$,
                  $$VALUES ('step_resent'::text, 'pgbus'::text, 'its message was lost'::text, '{"step": "a"}'::jsonb)$$,
                  'workflow_sweep: ... a step_resent event by pgbus');
SELECT is((pg_temp.att(pg_temp.cur('sw_kept'))).msg_id, (pg_temp.marked('sw_kept_msg'))::bigint,
          'workflow_sweep: a scheduled step whose message exists is not sent again');
SELECT is(pg_temp.events('sw_kept', (pg_temp.marked('sw_ev'))::bigint), '', 'workflow_sweep: ... no event');
SELECT is(pg_temp.has_amsg(pg_temp.cur('sw_recent')), false, 'workflow_sweep: a lost message of a step due only now is not sent yet');
SELECT is(pg_temp.read('sw_lost', 'sw_lost'), 1, 'workflow_sweep: the resent step is read');
SELECT is(pg_temp.ctx('sw_lost') ->> 'step_id', pg_temp.cur('sw_lost')::text, 'workflow_sweep: ... and begins its attempt');

-- Retention.
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_id IN (pg_temp.run('sw_old_fin'), pg_temp.run('sw_old_can'))), 0::bigint,
          'workflow_sweep: finished and cancelled runs older than the retention are deleted');
SELECT is((SELECT count(*) FROM pgbus.workflow_steps WHERE workflow_id IN (pg_temp.run('sw_old_fin'), pg_temp.run('sw_old_can'))
              OR step_id = ANY (ARRAY(SELECT jsonb_array_elements_text(pg_temp.marked('sw_old_fin_steps')))::bigint[])), 0::bigint,
          'workflow_sweep: ... with their attempts');
SELECT is((SELECT count(*) FROM pgbus.workflow_events WHERE workflow_id IN (pg_temp.run('sw_old_fin'), pg_temp.run('sw_old_can'))), 0::bigint,
          'workflow_sweep: ... and their events');
SELECT results_eq($$SELECT status FROM pgbus.workflows WHERE workflow_id IN (pg_temp.run('sw_young_fin'), pg_temp.run('sw_old_paused')) ORDER BY status$$,
                  $$VALUES ('finished'::text), ('paused')$$,
                  'workflow_sweep: a run finished 10 days ago and an old paused run are kept');
SELECT results_eq($$SELECT status, rerun_of FROM pgbus.workflows WHERE workflow_id = pg_temp.run('sw_child')$$,
                  $$VALUES ('ready'::text, NULL::uuid)$$, 'workflow_sweep: a rerun of a deleted run is kept, rerun_of cleared');

-- The gauges (as they were after the sweep's work).
SELECT set_eq(
    $$SELECT e ->> 'workflow_class' AS c, e ->> 'status' AS s, (e ->> 'count')::int AS n FROM jsonb_array_elements(pg_temp.marked('sweep1') -> 'runs') e$$,
    $$VALUES ('t_wfc_sw_stall', 'paused', 1), ('t_wfc_sw_timeout', 'paused', 1), ('t_wfc_sw_paused', 'paused', 1),
             ('t_wfc_sw_fresh', 'running', 1), ('t_wfc_sw_lost', 'ready', 1), ('t_wfc_sw_kept', 'ready', 1),
             ('t_wfc_sw_recent', 'ready', 1), ('t_wfc_sw_old_paused', 'paused', 1), ('t_wfc_sw_old_fin', 'ready', 1)$$,
    'workflow_sweep: "runs" counts ongoing runs by class and status');
SELECT set_eq(
    $$SELECT e ->> 'workflow_class' AS c, e ->> 'reason' AS r, (e ->> 'count')::int AS n FROM jsonb_array_elements(pg_temp.marked('sweep1') -> 'stuck') e$$,
    $$VALUES ('t_wfc_sw_stall', 'stalled', 1), ('t_wfc_sw_timeout', 'stalled', 1), ('t_wfc_sw_paused', 'paused_manual', 1),
             ('t_wfc_sw_lost', 'overdue', 1), ('t_wfc_sw_kept', 'overdue', 1), ('t_wfc_sw_old_paused', 'paused_manual', 1)$$,
    'workflow_sweep: "stuck" counts stuck runs by class and reason');
SELECT is(pgbus.workflow_sweep() -> 'stalled', '[]'::jsonb, 'workflow_sweep: a second sweep stalls nothing more');

-- The stall actions reattempt and cancel.
DO $d$ BEGIN PERFORM pg_temp.go('sw_re', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_re');
SELECT is(pgbus.workflow_sweep(stall_action => 'reattempt') -> 'stalled',
          jsonb_build_array(jsonb_build_object('workflow_id', pg_temp.run('sw_re'), 'workflow_class', 't_wfc_sw_re', 'step', 'a',
                                               'action', 'reattempt', 'was', 'running', 'status', 'ready',
                                               'error_class', 'pgbus.StepStalled')),
          'workflow_sweep: stall action reattempt');
SELECT is(pg_temp.attempts('sw_re'), 'a#1:stalled,a#2:scheduled', 'workflow_sweep: reattempt schedules the step again');
SELECT is((pg_temp.w('sw_re')).status, 'ready', 'workflow_sweep: reattempt: the run is ready');
DO $d$ BEGIN PERFORM pg_temp.go('sw_ca', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_ca');
SELECT is(pgbus.workflow_sweep(stall_action => 'cancel') -> 'stalled' -> 0 ->> 'action', 'cancel', 'workflow_sweep: stall action cancel');
SELECT results_eq($$SELECT status, ended_at IS NOT NULL FROM pgbus.workflows WHERE workflow_id = pg_temp.run('sw_ca')$$,
                  $$VALUES ('cancelled'::text, true)$$, 'workflow_sweep: cancel: the run is cancelled');
SELECT is(pg_temp.attempts('sw_ca'), 'a#1:stalled', 'workflow_sweep: cancel: its attempt is stalled');
DO $d$ BEGIN PERFORM pg_temp.go('sw_bad', '[{"name": "a"}]'); END $d$;
UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes' WHERE step_id = pg_temp.cur('sw_bad');
SELECT throws_ok($$SELECT pgbus.workflow_sweep(stall_action => 'explode')$$, '22023', NULL,
                 'workflow_sweep: an unknown stall action is refused');
-- The retention and resend_after arguments.
SELECT is(pgbus.workflow_sweep(retention => interval '5 days') -> 'deleted', '1'::jsonb,
          'workflow_sweep: a shorter retention deletes the run finished 10 days ago');

SELECT * FROM finish();
ROLLBACK;
