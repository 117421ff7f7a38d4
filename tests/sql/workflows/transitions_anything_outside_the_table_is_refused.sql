-- pgTAP tests for sql/views/010_workflow_transitions.sql: Anything outside the table is refused.
-- (Split from workflow_transitions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(164);
\ir ../include/workflow_transitions_setup.psql
-------------------------------------------------------------------------------------------------
-- Anything outside the table is refused.
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.workflow_transition('runner', 'rerun', 'finished'), NULL, 'workflow_transition: an outside verb said by a runner is refused');
SELECT is(pgbus.workflow_transition('outside', 'complete', 'running'), NULL, 'workflow_transition: a runner verb said from outside is refused');
SELECT is(pgbus.workflow_transition('other', 'pause', 'running'), NULL, 'workflow_transition: an unknown kind is refused');
SELECT is(pgbus.workflow_transition('outside', 'explode', 'ready'), NULL, 'workflow_transition: an unknown verb is refused');
SELECT is(pgbus.workflow_transition('outside', 'pause', 'sleeping'), NULL, 'workflow_transition: an unknown status is refused');
SELECT is(pgbus.workflow_transition(NULL, NULL, NULL), NULL, 'workflow_transition: NULLs are refused');
SELECT is(pgbus.workflow_transition('outside', 'PAUSE', 'ready'), NULL, 'workflow_transition: verbs are case-sensitive');

-------------------------------------------------------------------------------------------------
-- The refused outside verbs on real runs: one run in each status, each in its own class and
-- queue so that reading one's step begins no other.
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE t_runs (status text PRIMARY KEY, id uuid);
CREATE FUNCTION pg_temp.run(status text) RETURNS uuid LANGUAGE sql AS $f$
    SELECT id FROM t_runs WHERE t_runs.status = $1
$f$;
CREATE FUNCTION pg_temp.status_of(status text) RETURNS text LANGUAGE sql AS $f$
    SELECT w.status FROM pgbus.workflows w WHERE w.workflow_id = pg_temp.run($1)
$f$;
-- Registers class/queue 't_wft_<status>' with steps a (a gate for signal "go"), b and starts a
-- run of it.
CREATE FUNCTION pg_temp.start(status text) RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    id uuid;
BEGIN
    PERFORM pgbus.workflow_register('t_wft_' || status,
                                    '[{"name": "a", "wait": 0, "wait_for": "go"}, {"name": "b", "wait": 0}]',
                                    'd1', 't_wft_' || status);
    SELECT s.workflow_id INTO id FROM pgbus.workflow_start('t_wft_' || status, arguments => '{"n": 1}') s;
    INSERT INTO t_runs VALUES (start.status, id);
    RETURN id;
END;
$f$;
-- Begins the run's current step the way a worker does (its only message in its queue).
CREATE FUNCTION pg_temp.begin(status text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT (context ->> 'step_id')::bigint FROM pgbus.read_jobs(ARRAY['t_wft_' || $1], 30, 10, 'host:1', 'rev')
$f$;
-- Everything that belongs to a run: its row, its attempts, its messages (queue and archive),
-- how many events it has, how many reruns point at it.
CREATE FUNCTION pg_temp.snapshot(run uuid) RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
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
-- Says an outside verb to the run in `status` and records the answer and the run before and after.
CREATE TEMP TABLE t_refusals (status text, verb text, answer jsonb, before jsonb, after jsonb,
                              events_before bigint, events_after bigint, status_after text,
                              PRIMARY KEY (status, verb));
CREATE FUNCTION pg_temp.refuse(status text, verb text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
    run uuid := pg_temp.run(status);
    b jsonb := pg_temp.snapshot(run);
    eb bigint := (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = run);
    answer jsonb;
BEGIN
    BEGIN
        answer := pgbus.workflow_command(run, verb, 'tester', 'testing a refusal',
                                         CASE verb WHEN 'resume_at' THEN '{"step": "a"}'::jsonb
                                                   WHEN 'reschedule' THEN jsonb_build_object('at', now() + interval '1 hour')
                                                   ELSE '{}'::jsonb END);
    EXCEPTION WHEN OTHERS THEN
        answer := jsonb_build_object('raised', SQLSTATE, 'message', SQLERRM);
    END;
    INSERT INTO t_refusals VALUES (status, verb, answer, b, pg_temp.snapshot(run), eb,
                                   (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = run),
                                   (SELECT w.status FROM pgbus.workflows w WHERE w.workflow_id = run));
END;
$f$;

-- ready: its first step scheduled.
SELECT isnt(pg_temp.start('ready'), NULL, 'setup: a ready run');
-- running: its first step read by a worker.
SELECT isnt(pg_temp.start('running'), NULL, 'setup: a run to be running');
SELECT isnt(pg_temp.begin('running'), NULL, 'setup: its first step begun');
-- waiting: its first step parked at its gate.
SELECT isnt(pg_temp.start('waiting'), NULL, 'setup: a run to be waiting');
SELECT is(pgbus.workflow_end_step(pg_temp.begin('waiting'), 'park') ->> 'status', 'waiting', 'setup: the run waits');
-- paused: paused by an operator while its step was scheduled.
SELECT isnt(pg_temp.start('paused'), NULL, 'setup: a run to be paused');
SELECT is(pgbus.workflow_command(pg_temp.run('paused'), 'pause') ->> 'ok', 'true', 'setup: the run paused');
-- finished: its step said finished.
SELECT isnt(pg_temp.start('finished'), NULL, 'setup: a run to be finished');
SELECT is(pgbus.workflow_end_step(pg_temp.begin('finished'), 'finished') ->> 'status', 'finished', 'setup: the run finished');
-- cancelled: cancelled by an operator.
SELECT isnt(pg_temp.start('cancelled'), NULL, 'setup: a run to be cancelled');
SELECT is(pgbus.workflow_command(pg_temp.run('cancelled'), 'cancel') ->> 'status', 'cancelled', 'setup: the run cancelled');

SELECT results_eq(
    $$SELECT status, pg_temp.status_of(status) FROM t_runs ORDER BY pg_temp.status_ord(status)$$,
    $$VALUES ('ready', 'ready'), ('running', 'running'), ('waiting', 'waiting'), ('paused', 'paused'),
             ('finished', 'finished'), ('cancelled', 'cancelled')$$,
    'setup: one run in each status');

-- Every refused outside verb, on the run in that status.
DO $d$ BEGIN
    PERFORM pg_temp.refuse(from_status, verb)
    FROM t_expected WHERE kind = 'outside' AND to_status IS NULL
    ORDER BY pg_temp.verb_ord(kind, verb), pg_temp.status_ord(from_status);
END $d$;

SELECT is((SELECT count(*) FROM t_refusals), 36::bigint, 'the expectation refuses 36 (outside verb, status) cases');
SELECT is(answer, jsonb_build_object('ok', false, 'code', 'not_allowed', 'status', status),
          format('workflow_command(%s) on a %s run answers not_allowed with status %s', verb, status, status))
FROM t_refusals ORDER BY pg_temp.verb_ord('outside', verb), pg_temp.status_ord(status);
SELECT is(events_after, events_before, format('workflow_command(%s) refused on a %s run writes no event', verb, status))
FROM t_refusals ORDER BY pg_temp.verb_ord('outside', verb), pg_temp.status_ord(status);
SELECT is(status_after, status, format('workflow_command(%s) refused on a %s run leaves it %s', verb, status, status))
FROM t_refusals ORDER BY pg_temp.verb_ord('outside', verb), pg_temp.status_ord(status);
SELECT is(after, before, format('workflow_command(%s) refused on a %s run changes nothing (run, attempts, messages, reruns)', verb, status))
FROM t_refusals ORDER BY pg_temp.verb_ord('outside', verb), pg_temp.status_ord(status);

SELECT * FROM finish();
ROLLBACK;
