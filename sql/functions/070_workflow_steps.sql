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

-- Called for every StepJob message a worker reads (by pgbus.read_jobs, in the same
-- transaction). Answers the attempt's context to run it; {"stalled": true, ...} when the
-- message came back while its attempt ran (its worker died: the stall action applied, the
-- message is archived); or NULL when there is nothing to run: the message was stale
-- (archived), the attempt is not due yet (hidden until it is), or the step is unknown (the run
-- paused with StepNotDefined) or a gravestone (skipped).
CREATE OR REPLACE FUNCTION pgbus.workflow_begin_step(
    queue text, msg_id bigint, message jsonb, worker text DEFAULT NULL,
    app_revision text DEFAULT NULL, stall_action text DEFAULT 'pause'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
    digest text;
    step jsonb;
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
       OR attempt.status NOT IN ('scheduled', 'running') OR run.status NOT IN ('ready', 'running') THEN
        PERFORM pgbus.queue_archive(queue, msg_id);  -- stale: superseded, or its run moved on or is gone
        RETURN NULL;
    END IF;
    IF attempt.status = 'running' THEN
        PERFORM pgbus.queue_archive(queue, msg_id);
        RETURN jsonb_build_object(
            'stalled', true, 'detection', 'redelivery', 'action', stall_action,
            'status', pgbus.workflow_stall(run, attempt, 'redelivery', stall_action),
            'workflow_id', run.workflow_id, 'workflow_class', run.workflow_class,
            'step_name', attempt.step_name, 'attempt', attempt.attempt);
    END IF;
    IF attempt.scheduled_at > clock_timestamp() THEN  -- rescheduled after it was sent
        PERFORM pgmq.set_vt(queue, msg_id, attempt.scheduled_at);
        RETURN NULL;
    END IF;
    -- The class's digest and the step's definition, in one read.
    SELECT d.digest, (SELECT s FROM jsonb_array_elements(d.steps) s WHERE s ->> 'name' = attempt.step_name)
    INTO digest, step
    FROM pgbus.workflow_definitions d WHERE d.workflow_class = run.workflow_class;
    UPDATE pgbus.workflow_steps
    SET status = 'running', started_at = clock_timestamp(), worker = workflow_begin_step.worker,
        app_revision = workflow_begin_step.app_revision
    WHERE step_id = attempt.step_id;
    UPDATE pgbus.workflows SET status = 'running', updated_at = now() WHERE workflow_id = run.workflow_id;
    PERFORM pgbus.workflow_event(run.workflow_id, 'step_started', attempt.step_id, NULL, NULL,
                                 jsonb_build_object('step', attempt.step_name, 'attempt', attempt.attempt,
                                                    'worker', worker));
    IF step IS NULL OR coalesce((step ->> 'removed')::boolean, false) THEN
        PERFORM pgbus.workflow_end_step(
            attempt.step_id,
            CASE WHEN step IS NULL THEN 'pause' ELSE 'skip' END,
            error => CASE WHEN step IS NULL THEN jsonb_build_object(
                'class', 'pgbus.workflow.StepNotDefined',
                'message', format('%s has no step %s', run.workflow_class, attempt.step_name)) END);
        RETURN NULL;
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
        'definition_outdated', run.definition_digest IS DISTINCT FROM digest)
        || CASE WHEN step ? 'wait_for' THEN pgbus.workflow_gate_context(run, attempt, step ->> 'wait_for')
                ELSE '{}' END;
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
            started_at = NULL, worker = NULL, app_revision = NULL
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

-- (Its earlier signature, without the waiting-step arguments.)
DROP FUNCTION IF EXISTS pgbus.workflow_end_step(bigint, text, jsonb, jsonb, interval, text);

-- Ends an attempt with the step's verb, in one transaction: the attempt's outcome, output and
-- error; the run's transition (next step scheduled and sent, or paused, cancelled, finished,
-- or parked); the attempt's message archived; the events. `wait` delays a reattempt.
-- Waiting steps: `signal_id` is the signal the step took (claimed now; consumed when the step
-- completes or skips); 'park' and 'rewait' park the step at its signal gate, having seen the
-- pending signals up to `seen_signal_id`, or on a batch opened now from `fan_out` (the body's
-- jobs: [{"queue", "job_class", "arguments", "run_at"}, ...]). Answers {"ok": true, "status":
-- ...} or a refusal {"ok": false, "code": "stale" | "not_allowed", "status": ...}; a refused
-- end still archives the message and records what the step did, and takes no signal and
-- opens no batch.
CREATE OR REPLACE FUNCTION pgbus.workflow_end_step(
    step_id bigint,
    verb text,
    output jsonb DEFAULT NULL,
    error jsonb DEFAULT NULL,
    wait interval DEFAULT NULL,
    reason text DEFAULT NULL,
    signal_id bigint DEFAULT NULL,
    fan_out jsonb DEFAULT NULL,
    seen_signal_id bigint DEFAULT NULL
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
    -- (A scheduled attempt was woken and sent again since: that message is not this one.)
    IF attempt.msg_id IS NOT NULL AND attempt.status <> 'scheduled' THEN
        PERFORM pgbus.queue_archive(attempt.queue, attempt.msg_id);
    END IF;
    IF attempt.status <> 'running' OR attempt.step_id IS DISTINCT FROM run.current_step_id THEN
        -- Stalled, or superseded while it ran: its end changes nothing.
        RETURN jsonb_build_object('ok', false, 'code', 'stale', 'status', run.status);
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
                              'step', attempt.step_name);
END;
$$;
