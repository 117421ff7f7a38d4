-- A step attempt's life: begun when its StepJob message is read, ended with the step's verb in
-- one transaction with everything that goes with it, stalled when its worker died or it ran
-- too long.

-- How an attempt ends, by the verb (and whether an error was recorded).
CREATE OR REPLACE FUNCTION pgbus.workflow_attempt_status(verb text, failed boolean)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN failed THEN 'failed'
        WHEN verb IN ('complete', 'finished', 'resolve') THEN 'completed'
        WHEN verb = 'skip' THEN 'skipped'
        WHEN verb = 'cancel' THEN 'cancelled'
        ELSE 'interrupted'  -- pause, reattempt: the step did not finish its work
    END
$$;

-- The worker died while the attempt ran (its message came back), or the attempt ran past its
-- timeout: the attempt is 'stalled' and `action` (pause, reattempt or cancel) applies to the
-- run. Caller holds the run's row lock. Returns the run's new status.
CREATE OR REPLACE FUNCTION pgbus.workflow_stall(
    run pgbus.workflows, attempt pgbus.workflow_steps, detection text, action text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    stall_error jsonb := jsonb_build_object(
        'class', 'pgbus.StepStalled',
        'message', CASE detection
            WHEN 'redelivery' THEN format('step %s was delivered again while it ran: its worker died', attempt.step_name)
            ELSE format('step %s ran longer than %s', attempt.step_name,
                        coalesce(attempt.timeout::text, 'the stall threshold')) END,
        'worker', attempt.worker);
BEGIN
    IF action NOT IN ('pause', 'reattempt', 'cancel') THEN
        RAISE EXCEPTION 'pgbus: the stall action is pause, reattempt or cancel, got %', action
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgbus.workflow_steps
    SET status = 'stalled', outcome = action, ended_at = clock_timestamp(), error = stall_error,
        error_class = 'pgbus.StepStalled'
    WHERE step_id = attempt.step_id;
    PERFORM pgbus.workflow_event(run.workflow_id, 'stall_detected', attempt.step_id, 'pgbus', NULL,
                                 jsonb_build_object('detection', detection, 'action', action,
                                                    'step', attempt.step_name));
    IF run.status = 'paused' THEN
        RETURN 'paused';  -- already paused by an operator: resume decides
    ELSIF action = 'pause' THEN
        UPDATE pgbus.workflows SET status = 'paused', pause_cause = 'stall', updated_at = now()
        WHERE workflow_id = run.workflow_id;
        PERFORM pgbus.workflow_event(run.workflow_id, 'paused', attempt.step_id, 'pgbus', 'stalled');
        RETURN 'paused';
    ELSIF action = 'cancel' THEN
        PERFORM pgbus.workflow_end(run.workflow_id, 'cancelled', 'pgbus', 'stalled');
        RETURN 'cancelled';
    END IF;
    PERFORM pgbus.workflow_schedule_step(
        run, coalesce(pgbus.workflow_step_definition(run.workflow_class, attempt.step_name),
                      jsonb_build_object('name', attempt.step_name, 'queue', attempt.queue)),
        clock_timestamp(), 'pgbus');
    RETURN 'ready';
END;
$$;

-- (Its earlier signature, without body_started.)
DROP FUNCTION IF EXISTS pgbus.workflow_begin_step(text, bigint, jsonb, text, text, text);

-- Called for every StepJob message a worker reads (by pgbus.read_jobs, in the same
-- transaction). Answers the attempt's context to run it; {"stalled": true, ...} when the
-- message came back while its attempt's body ran (its worker died: the stall action applied, the
-- message is archived; when that worker is still registered, only the second time the message
-- comes back, so that a worker cut off by an outage can take it back meanwhile); {"held": true, ...} when the reading worker is the one running it; or NULL when there is nothing to run: the message was stale
-- (archived), the attempt is not due yet (hidden until it is), or the step is unknown (the run
-- paused with StepNotDefined) or a gravestone (skipped).
-- `body_started`: the caller starts the body at once (true) or holds the message to run later
-- (false: pgbus.workflow_steps_started marks it when its body starts). An attempt whose body
-- never started is no stall when its message comes back: it is begun afresh (or, its run paused
-- meanwhile, superseded so that resume sends it again). Every begin gets a new started_at, the
-- attempt's token: pgbus.workflow_end_step(begun_at => ...) accepts the end of the current
-- begin only.
CREATE OR REPLACE FUNCTION pgbus.workflow_begin_step(
    queue text, msg_id bigint, message jsonb, worker text DEFAULT NULL,
    app_revision text DEFAULT NULL, stall_action text DEFAULT 'pause', body_started boolean DEFAULT true
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
    digest text;
    step jsonb;
    begun timestamptz;
BEGIN
    -- The reader holds the message's row lock; waiting for the run's lock here while an
    -- operator or a step's end holds it and waits for the message would deadlock. So a busy
    -- run is passed over, and its message comes back a moment later.
    SELECT * INTO run FROM pgbus.workflows w
    WHERE w.workflow_id = (message -> 'kwargs' ->> 'workflow_id')::uuid FOR UPDATE SKIP LOCKED;
    -- (Nested, not "NOT FOUND AND EXISTS": that expression would be planned again every call.)
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM pgbus.workflows w
                   WHERE w.workflow_id = (message -> 'kwargs' ->> 'workflow_id')::uuid) THEN
            PERFORM pgmq.set_vt(queue, msg_id, clock_timestamp() + interval '100 milliseconds');
            RETURN NULL;
        END IF;
    END IF;
    SELECT * INTO attempt FROM pgbus.workflow_steps s
    WHERE s.step_id = (message -> 'kwargs' ->> 'step_id')::bigint;
    IF run.workflow_id IS NULL OR attempt.step_id IS NULL OR attempt.step_id IS DISTINCT FROM run.current_step_id
       OR attempt.status NOT IN ('scheduled', 'running') THEN
        PERFORM pgbus.queue_archive(queue, msg_id);  -- stale: superseded, or its run moved on or is gone
        RETURN NULL;
    END IF;
    IF attempt.status = 'running' THEN
        -- The message came back while its attempt was running: its worker died (or lost it).
        IF run.status NOT IN ('ready', 'running', 'paused') THEN
            -- The run ended (cancelled) while the step ran: the attempt ends with it.
            PERFORM pgbus.workflow_abandon(attempt.step_id);
            PERFORM pgbus.queue_archive(queue, msg_id);
            RETURN NULL;
        ELSIF attempt.worker = workflow_begin_step.worker THEN
            -- The reader is the worker running it: alive (its visibility heartbeat lapsed, say
            -- while the database was away). The read hid the message again; the worker checks
            -- that it still holds the attempt.
            RETURN jsonb_build_object('held', true, 'step_id', attempt.step_id,
                                      'workflow_id', run.workflow_id, 'step_name', attempt.step_name);
        ELSIF attempt.body_started_at IS NOT NULL THEN
            -- Its body ran on another worker. When that worker is still registered, it may be
            -- alive and only cut off for longer than the visibility timeout (an outage): the
            -- first time, the message stays hidden for this read's visibility timeout (the
            -- worker's visibility heartbeat takes it back when it still runs the step) and a
            -- step_redelivered event says so. When it comes back again and that worker has not
            -- heartbeated since, the worker is gone.
            -- So it is again each time that worker has heartbeated since the message last came
            -- back: alive, it was only cut off again (another outage during a long step).
            -- (A worker is host:pid, or host:pid#n for a process's n-th: the process's row.)
            IF EXISTS (SELECT 1 FROM pgbus.processes p
                       WHERE p.kind = 'worker' AND p.hostname || ':' || p.pid = split_part(attempt.worker, '#', 1)
                         AND p.last_heartbeat_at > coalesce(
                             (SELECT max(e.created_at) FROM pgbus.workflow_events e
                              WHERE e.workflow_id = run.workflow_id AND e.step_id = attempt.step_id
                                AND e.event = 'step_redelivered' AND e.created_at >= attempt.started_at),
                             '-infinity')) THEN
                PERFORM pgbus.workflow_event(run.workflow_id, 'step_redelivered', attempt.step_id, NULL,
                                             'its message came back while it ran on a worker that is still registered',
                                             jsonb_build_object('step', attempt.step_name, 'attempt', attempt.attempt,
                                                                'worker', attempt.worker, 'reader', worker));
                RETURN NULL;
            END IF;
            -- A stall, also while the run is paused (resume then sends the step again instead
            -- of waiting for a worker that is gone).
            PERFORM pgbus.queue_archive(queue, msg_id);
            RETURN jsonb_build_object(
                'stalled', true, 'detection', 'redelivery', 'action', stall_action, 'was', run.status,
                'status', pgbus.workflow_stall(run, attempt, 'redelivery', stall_action),
                'workflow_id', run.workflow_id, 'workflow_class', run.workflow_class,
                'step_name', attempt.step_name, 'attempt', attempt.attempt);
        ELSIF run.status = 'paused' THEN
            -- Read ahead, never started, and the run paused meanwhile: out of play, as pause does
            -- to a scheduled attempt; resume sends the step again.
            UPDATE pgbus.workflow_steps SET status = 'superseded', ended_at = clock_timestamp()
            WHERE step_id = attempt.step_id;
            PERFORM pgbus.workflow_event(run.workflow_id, 'step_released', attempt.step_id, NULL,
                                         'its worker stopped before the step began',
                                         jsonb_build_object('step', attempt.step_name, 'attempt', attempt.attempt,
                                                            'worker', attempt.worker));
            PERFORM pgbus.queue_archive(queue, msg_id);
            RETURN NULL;
        END IF;
        -- Read ahead and never started: it simply runs now (begun afresh below).
    ELSIF run.status NOT IN ('ready', 'running') THEN
        PERFORM pgbus.queue_archive(queue, msg_id);  -- stale: its run is paused, waiting or over
        RETURN NULL;
    END IF;
    IF attempt.scheduled_at > clock_timestamp() THEN  -- rescheduled after it was sent
        PERFORM pgmq.set_vt(queue, msg_id, attempt.scheduled_at);
        RETURN NULL;
    END IF;
    -- The class's digest and the step's definition, in one read.
    SELECT d.digest, (SELECT s FROM jsonb_array_elements(d.steps) s WHERE s ->> 'name' = attempt.step_name)
    INTO digest, step
    FROM pgbus.workflow_definitions d WHERE d.workflow_class = run.workflow_class;
    begun := clock_timestamp();
    UPDATE pgbus.workflow_steps
    SET status = 'running', started_at = begun, worker = workflow_begin_step.worker,
        app_revision = workflow_begin_step.app_revision,
        body_started_at = CASE WHEN body_started THEN begun END
    WHERE step_id = attempt.step_id;
    UPDATE pgbus.workflows SET status = 'running', updated_at = now() WHERE workflow_id = run.workflow_id;
    PERFORM pgbus.workflow_event(run.workflow_id, 'step_started', attempt.step_id, NULL, NULL,
                                 jsonb_build_object('step', attempt.step_name, 'attempt', attempt.attempt,
                                                    'worker', worker));
    IF step IS NULL OR coalesce((step ->> 'removed')::boolean, false) THEN
        -- Ended here, not run: answered {"concluded": true, "was", "status", "error"} so that
        -- the worker emits the run's event (paused, or finished after a last gravestone) and
        -- reports a step the definition does not have.
        RETURN jsonb_build_object(
            'concluded', true, 'was', run.status,
            'workflow_id', run.workflow_id, 'workflow_class', run.workflow_class,
            'step_name', attempt.step_name, 'attempt', attempt.attempt,
            'error', CASE WHEN step IS NULL THEN jsonb_build_object(
                'class', 'pgbus.workflow.StepNotDefined',
                'message', format('%s has no step %s', run.workflow_class, attempt.step_name)) END)
            || jsonb_build_object('status', pgbus.workflow_end_step(
                attempt.step_id,
                CASE WHEN step IS NULL THEN 'pause' ELSE 'skip' END,
                error => CASE WHEN step IS NULL THEN jsonb_build_object(
                    'class', 'pgbus.workflow.StepNotDefined',
                    'message', format('%s has no step %s', run.workflow_class, attempt.step_name)) END) ->> 'status');
    END IF;
    RETURN jsonb_build_object(
        'workflow_id', run.workflow_id,
        'workflow_class', run.workflow_class,
        'step_id', attempt.step_id,
        'step_name', attempt.step_name,
        'attempt', attempt.attempt,
        'arguments', run.arguments,
        'subject_type', run.subject_type,
        'subject_id', run.subject_id,
        'scheduled_at', attempt.scheduled_at,
        'begun_at', begun,
        'body_started', body_started,
        'timeout', extract(epoch FROM attempt.timeout),
        'definition_outdated', run.definition_digest IS DISTINCT FROM digest)
        || CASE WHEN step ? 'wait_for' THEN pgbus.workflow_gate_context(run, attempt, step ->> 'wait_for')
                ELSE '{}' END;
END;
$$;

-- The bodies of these begun attempts start now (each named by its step id and begin token,
-- started_at): from here on, their message coming back is a stall. Answers the step ids marked;
-- one not among them is no longer that begin (stalled, released or begun again): its body must
-- not run. Takes no run lock: a writer of the attempt holds the row, and the check is redone.
-- (PL/pgSQL, one UPDATE by primary key per attempt: it runs for nearly every step, inside the
-- read or the previous step's end, and both a SQL function's UPDATE and a join with
-- unnest(step_ids, begun_at), whose row count only a custom plan knows, would be planned again
-- on every call.)
CREATE OR REPLACE FUNCTION pgbus.workflow_steps_started(step_ids bigint[], begun_at timestamptz[])
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    marked bigint[] := '{}';
    marked_id bigint;
BEGIN
    FOR i IN 1 .. coalesce(array_length(step_ids, 1), 0) LOOP
        UPDATE pgbus.workflow_steps s SET body_started_at = clock_timestamp()
        WHERE s.step_id = step_ids[i] AND s.status = 'running' AND s.started_at = begun_at[i]
        RETURNING s.step_id INTO marked_id;
        IF FOUND THEN
            marked := marked || marked_id;
        END IF;
    END LOOP;
    RETURN marked;
END;
$$;

-- A step's attempt ran past its timeout and its body returned (or failed) late: nothing it did
-- commits; the attempt is stalled (detection 'timeout') and `action` applies to the run, as
-- the sweep would. Only the begin `begun_at` is touched. Returns the run's status, or NULL when
-- that begin was no longer current (the sweep or a redelivery got there first).
CREATE OR REPLACE FUNCTION pgbus.workflow_time_out_step(
    step_id bigint, begun_at timestamptz, action text DEFAULT 'pause'
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
BEGIN
    SELECT * INTO run FROM pgbus.workflows w
    WHERE w.workflow_id = (SELECT s.workflow_id FROM pgbus.workflow_steps s
                           WHERE s.step_id = workflow_time_out_step.step_id)
    FOR UPDATE;
    SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = workflow_time_out_step.step_id;
    IF NOT FOUND OR attempt.status <> 'running' OR attempt.step_id IS DISTINCT FROM run.current_step_id
       OR attempt.started_at IS DISTINCT FROM begun_at THEN
        RETURN NULL;
    END IF;
    IF attempt.msg_id IS NOT NULL THEN
        PERFORM pgbus.queue_archive(attempt.queue, attempt.msg_id);
    END IF;
    RETURN pgbus.workflow_stall(run, attempt, 'timeout', action);
END;
$$;

-- Step messages a stopping worker read ahead and hands back without running them: their
-- attempts were begun when read, so each goes back to scheduled and its run to ready (or, paused
-- meanwhile, is superseded), with a step_released event; the next read begins it afresh
-- instead of taking it for a dead worker's. Only attempts still running for `worker` change.
-- Returns how many went back.
CREATE OR REPLACE FUNCTION pgbus.workflow_release_steps(step_ids bigint[], worker text)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    id bigint;
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
    released integer := 0;
BEGIN
    FOREACH id IN ARRAY coalesce(step_ids, '{}') LOOP
        SELECT * INTO run FROM pgbus.workflows w
        WHERE w.workflow_id = (SELECT s.workflow_id FROM pgbus.workflow_steps s WHERE s.step_id = id)
        FOR UPDATE;
        SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = id;
        CONTINUE WHEN attempt.status IS DISTINCT FROM 'running' OR attempt.worker IS DISTINCT FROM worker
                   OR id IS DISTINCT FROM run.current_step_id;
        -- (Paused meanwhile: out of play, as pause does to a scheduled attempt; resume sends
        -- the step again.)
        UPDATE pgbus.workflow_steps
        SET status = CASE WHEN run.status = 'paused' THEN 'superseded' ELSE 'scheduled' END,
            ended_at = CASE WHEN run.status = 'paused' THEN clock_timestamp() END,
            started_at = NULL, body_started_at = NULL, worker = NULL, app_revision = NULL
        WHERE step_id = id;
        UPDATE pgbus.workflows SET status = 'ready', updated_at = now()
        WHERE workflow_id = run.workflow_id AND status = 'running';
        PERFORM pgbus.workflow_event(run.workflow_id, 'step_released', id, NULL, 'its worker stopped',
                                     jsonb_build_object('step', attempt.step_name, 'attempt', attempt.attempt,
                                                        'worker', worker));
        released := released + 1;
    END LOOP;
    RETURN released;
END;
$$;

-- A worker's read lost its connection, possibly after it committed: the attempts it began
-- for `worker` whose answer never arrived would look, when their messages come back, like a
-- dead worker's (their bodies marked started). So every attempt running for `worker` that is
-- not among `held` (the step ids it holds) goes back as workflow_release_steps does, and its
-- message is visible at once. Returns how many went back. (Rare: the open attempts' index.)
CREATE OR REPLACE FUNCTION pgbus.workflow_release_lost_steps(worker text, held bigint[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    lost bigint[];
    released integer;
BEGIN
    SELECT array_agg(s.step_id ORDER BY s.step_id) INTO lost FROM pgbus.workflow_steps s
    WHERE s.ended_at IS NULL AND s.status = 'running'
      AND s.worker = workflow_release_lost_steps.worker
      AND s.step_id <> ALL (coalesce(held, '{}'));
    IF lost IS NULL THEN
        RETURN 0;
    END IF;
    released := pgbus.workflow_release_steps(lost, worker);
    PERFORM pgmq.set_vt(s.queue, s.msg_id, 0) FROM pgbus.workflow_steps s
    WHERE s.step_id = ANY (lost) AND s.msg_id IS NOT NULL AND s.worker IS NULL
      AND s.status IN ('scheduled', 'superseded');
    RETURN released;
END;
$$;

-- Ends `attempt`, the run's current attempt, with `verb` and applies what that leads to:
-- `to_status` from the transition table, or NULL when it refused the verb, so that only the
-- attempt's end is recorded (as 'superseded'). `actor` names who ended it on the step's event
-- (NULL: the step itself) and on the run's ('step' when NULL). Caller holds the run's row
-- lock. Returns the run's new status.
CREATE OR REPLACE FUNCTION pgbus.workflow_conclude(
    run pgbus.workflows, attempt pgbus.workflow_steps, verb text, to_status text,
    output jsonb DEFAULT NULL, error jsonb DEFAULT NULL, wait interval DEFAULT NULL,
    actor text DEFAULT NULL, reason text DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    failed boolean := error IS NOT NULL;
    ended text := CASE WHEN to_status IS NULL THEN 'superseded'
                       ELSE pgbus.workflow_attempt_status(verb, failed) END;
    run_actor text := coalesce(actor, 'step');
BEGIN
    UPDATE pgbus.workflow_steps s
    SET status = ended, outcome = verb, ended_at = clock_timestamp(),
        output = CASE WHEN verb IN ('complete', 'finished') THEN workflow_conclude.output END,
        error = workflow_conclude.error, error_class = workflow_conclude.error ->> 'class',
        signal_id = attempt.signal_id
    WHERE s.step_id = attempt.step_id;
    IF attempt.signal_id IS NOT NULL AND ended IN ('completed', 'skipped') THEN
        UPDATE pgbus.workflow_signals SET status = 'consumed', consumed_at = clock_timestamp()
        WHERE signal_id = attempt.signal_id AND status = 'claimed';
    END IF;
    PERFORM pgbus.workflow_event(
        run.workflow_id,
        CASE WHEN failed THEN 'step_failed' ELSE 'step_' || pgbus.workflow_attempt_status(verb, false) END,
        attempt.step_id, actor, reason,
        jsonb_strip_nulls(jsonb_build_object('step', attempt.step_name, 'attempt', attempt.attempt,
                                             'verb', verb, 'error_class', error ->> 'class')));
    IF to_status IS NULL THEN
        RETURN run.status;
    ELSIF to_status = 'paused' THEN
        IF run.status <> 'paused' THEN
            UPDATE pgbus.workflows
            SET status = 'paused', pause_cause = CASE WHEN failed THEN 'error' ELSE 'manual' END,
                updated_at = now()
            WHERE workflow_id = run.workflow_id;
            PERFORM pgbus.workflow_event(run.workflow_id, 'paused', attempt.step_id, run_actor, reason,
                                         jsonb_strip_nulls(jsonb_build_object('error_class', error ->> 'class')));
        END IF;
        RETURN 'paused';
    ELSIF to_status IN ('cancelled', 'finished') THEN
        PERFORM pgbus.workflow_end(run.workflow_id, to_status, run_actor, reason);
        RETURN to_status;
    ELSIF verb = 'reattempt' THEN
        PERFORM pgbus.workflow_schedule_step(
            run, coalesce(pgbus.workflow_step_definition(run.workflow_class, attempt.step_name),
                          jsonb_build_object('name', attempt.step_name, 'queue', attempt.queue)),
            clock_timestamp() + coalesce(wait, interval '0'), actor);
        RETURN 'ready';
    END IF;
    RETURN pgbus.workflow_advance(run, attempt.step_name, actor);  -- complete, skip, resolve
END;
$$;

-- (Its earlier signatures, without the waiting-step arguments, then without begun_at.)
DROP FUNCTION IF EXISTS pgbus.workflow_end_step(bigint, text, jsonb, jsonb, interval, text);
DROP FUNCTION IF EXISTS pgbus.workflow_end_step(bigint, text, jsonb, jsonb, interval, text, bigint, jsonb, bigint);

-- Ends an attempt with the step's verb, in one transaction: the attempt's outcome, output and
-- error; the run's transition (next step scheduled and sent, or paused, cancelled, finished,
-- or parked); the attempt's message archived; the events. `wait` delays a reattempt.
-- Waiting steps: `signal_id` is the signal the step took (claimed now; consumed when the step
-- completes or skips); 'park' and 'rewait' park the step at its signal gate, having seen the
-- pending signals up to `seen_signal_id`, or on a batch opened now from `fan_out` (the body's
-- jobs: [{"queue", "job_class", "arguments", "run_at"}, ...]). Answers {"ok": true, "status":
-- ...} or a refusal {"ok": false, "code": "stale" | "not_allowed", "status": ...}; a refused
-- end still archives the message and records what the step did, and takes no signal and
-- opens no batch. `begun_at` (the context's begun_at) names the begin this end belongs to: the
-- end of an earlier begin of the same attempt (lost in a server crash, or timed out and begun
-- again) is refused as stale; NULL skips that check. A worker rolls back a refused end with
-- everything its body wrote.
CREATE OR REPLACE FUNCTION pgbus.workflow_end_step(
    step_id bigint,
    verb text,
    output jsonb DEFAULT NULL,
    error jsonb DEFAULT NULL,
    wait interval DEFAULT NULL,
    reason text DEFAULT NULL,
    signal_id bigint DEFAULT NULL,
    fan_out jsonb DEFAULT NULL,
    seen_signal_id bigint DEFAULT NULL,
    begun_at timestamptz DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    attempt pgbus.workflow_steps;
    run pgbus.workflows;
    to_status text;
    new_status text;
BEGIN
    IF verb IN ('wake', 'resolve') OR NOT EXISTS (
        SELECT FROM pgbus.workflow_transitions t WHERE t.kind = 'runner' AND t.verb = workflow_end_step.verb
    ) THEN
        RAISE EXCEPTION 'pgbus: % is not a step verb', quote_nullable(verb) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF fan_out IS NOT NULL AND verb <> 'park' THEN
        RAISE EXCEPTION 'pgbus: a fan-out batch opens only when its step parks' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO run FROM pgbus.workflows w
    WHERE w.workflow_id = (SELECT s.workflow_id FROM pgbus.workflow_steps s
                           WHERE s.step_id = workflow_end_step.step_id)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found');
    END IF;
    -- Read under the run's lock, which every writer of an attempt holds: this is its latest state.
    SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = workflow_end_step.step_id;
    IF attempt.status <> 'running' OR attempt.step_id IS DISTINCT FROM run.current_step_id
       OR (workflow_end_step.begun_at IS NOT NULL AND attempt.started_at IS DISTINCT FROM workflow_end_step.begun_at) THEN
        -- Stalled, superseded while it ran, or begun again since: its end changes nothing.
        -- (The message still belongs to whoever runs the attempt now, or, scheduled, was sent
        -- again; only an ended attempt's is archived.)
        IF attempt.msg_id IS NOT NULL AND attempt.status NOT IN ('scheduled', 'running') THEN
            PERFORM pgbus.queue_archive(attempt.queue, attempt.msg_id);
        END IF;
        RETURN jsonb_build_object('ok', false, 'code', 'stale', 'status', run.status);
    END IF;
    IF attempt.msg_id IS NOT NULL THEN
        PERFORM pgbus.queue_archive(attempt.queue, attempt.msg_id);
    END IF;
    SELECT t.to_status INTO to_status FROM pgbus.workflow_transitions t
    WHERE t.kind = 'runner' AND t.verb = workflow_end_step.verb AND t.from_status = run.status;
    IF to_status IS NOT NULL AND workflow_end_step.signal_id IS NOT NULL THEN
        PERFORM pgbus.workflow_take_signal(run, attempt, workflow_end_step.signal_id);
        attempt.signal_id := workflow_end_step.signal_id;
    END IF;
    IF to_status IS NOT NULL AND verb IN ('park', 'rewait') THEN
        new_status := pgbus.workflow_park(run, attempt, verb, fan_out, seen_signal_id, reason);
    ELSE
        new_status := pgbus.workflow_conclude(run, attempt, verb, to_status, output, error, wait,
                                              NULL, reason);
    END IF;
    IF to_status IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_allowed', 'status', run.status);
    END IF;
    RETURN jsonb_build_object('ok', true, 'status', new_status, 'workflow_class', run.workflow_class,
                              'step', attempt.step_name)
           -- (Paused by an operator while the step ran: its end changes no status, emits nothing.)
           || CASE WHEN run.status = 'paused' THEN '{"was": "paused"}'::jsonb ELSE '{}' END;
END;
$$;
