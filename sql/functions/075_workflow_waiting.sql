-- Waiting steps: a step parks at a signal gate or on a fan-out batch; a signal wakes it, the
-- batch's end resolves it, its wait timeout ends the wait. Every function here runs under the
-- run's row lock, taken by its caller unless it says otherwise.

-- The job class of a fan-out batch's on_complete callback (pgbus.workflow.BatchFinishedJob).
CREATE OR REPLACE FUNCTION pgbus.workflow_batch_job_class()
RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'pgbus.workflow:BatchFinishedJob' $$;

-- What a gate step needs to decide when it begins: the signal it took on an earlier attempt
-- (claimed), then the pending signals named `wait_for` ('*': any name), oldest first; whether its wait timed
-- out (on_timeout 'run') and whether it waited before (so that parking again is a 'rewait').
CREATE OR REPLACE FUNCTION pgbus.workflow_gate_context(
    run pgbus.workflows, attempt pgbus.workflow_steps, wait_for text
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'wait_for', wait_for,
        'timed_out', attempt.timed_out,
        'waited', attempt.waiting_since IS NOT NULL,
        'signals', coalesce(jsonb_agg(jsonb_build_object(
                        'signal_id', g.signal_id, 'name', g.name, 'payload', g.payload,
                        'idempotency_key', g.idempotency_key, 'status', g.status,
                        'created_at', g.created_at)
                    ORDER BY g.status = 'claimed' DESC, g.signal_id), '[]'))
    FROM pgbus.workflow_signals g
    WHERE g.workflow_id = run.workflow_id
      AND ((g.status = 'claimed' AND g.step_name = attempt.step_name)
           OR (g.status = 'pending' AND (wait_for = '*' OR g.name = wait_for)))
$$;

-- The attempt takes signal `signal`: pending -> claimed (or, claimed by an earlier attempt of
-- the same step, it moves to this one). A claimed signal survives a reattempt or a pause.
CREATE OR REPLACE FUNCTION pgbus.workflow_take_signal(
    run pgbus.workflows, attempt pgbus.workflow_steps, signal bigint
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    taken pgbus.workflow_signals;
BEGIN
    SELECT * INTO taken FROM pgbus.workflow_signals g
    WHERE g.signal_id = signal AND g.workflow_id = run.workflow_id
      AND (g.status = 'pending' OR (g.status = 'claimed' AND g.step_name = attempt.step_name))
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgbus: signal % is not pending for this run', signal
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgbus.workflow_signals
    SET status = 'claimed', claimed_at = coalesce(claimed_at, clock_timestamp()),
        step_name = attempt.step_name, step_id = attempt.step_id
    WHERE signal_id = signal;
    IF taken.status = 'pending' THEN
        PERFORM pgbus.workflow_event(run.workflow_id, 'signal_claimed', attempt.step_id, NULL, NULL,
                                     jsonb_build_object('signal_id', signal, 'name', taken.name,
                                                        'step', attempt.step_name));
    END IF;
END;
$$;

-- Opens the fan-out batch of `attempt` from the body's jobs ([{"queue", "job_class",
-- "arguments", "run_at"}, ...]): one batch described "Class#step workflow_id" whose on_complete
-- is the BatchFinishedJob, the members enqueued into it (one statement per queue, class and
-- time). Returns the batch's id; an empty batch is finished already, and has no callback.
CREATE OR REPLACE FUNCTION pgbus.workflow_open_fan_out(
    run pgbus.workflows, attempt pgbus.workflow_steps, jobs jsonb
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    batch uuid;
    g record;
BEGIN
    IF jsonb_typeof(jobs) IS DISTINCT FROM 'array' OR EXISTS (
        SELECT 1 FROM jsonb_array_elements(jobs) j
        WHERE jsonb_typeof(j) <> 'object' OR jsonb_typeof(j -> 'arguments') IS DISTINCT FROM 'object'
           OR coalesce(j ->> 'queue', '') = '' OR coalesce(j ->> 'job_class', '') = ''
    ) THEN
        RAISE EXCEPTION 'pgbus: fan-out jobs are [{"queue", "job_class", "arguments"}, ...], got %', jobs
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    batch := pgbus.batch_open(
        format('%s#%s %s', run.workflow_class, attempt.step_name, run.workflow_id),
        jsonb_build_object('workflow_id', run.workflow_id, 'step_id', attempt.step_id),
        -- An empty batch is resolved by the park itself: no callback to send.
        CASE WHEN jsonb_array_length(jobs) > 0
             THEN jsonb_build_object('job_class', pgbus.workflow_batch_job_class(), 'queue', attempt.queue) END);
    FOR g IN
        SELECT j ->> 'queue' AS queue, j ->> 'job_class' AS job_class,
               (j ->> 'run_at')::timestamptz AS run_at, array_agg(j -> 'arguments' ORDER BY i) AS arguments
        FROM jsonb_array_elements(jobs) WITH ORDINALITY AS t(j, i)
        GROUP BY 1, 2, 3 ORDER BY min(i)
    LOOP
        PERFORM pgbus.enqueue(g.queue, g.job_class, g.arguments, g.run_at, batch);
    END LOOP;
    PERFORM pgbus.batch_close(batch);
    RETURN batch;
END;
$$;

-- The parked attempt goes out again (a signal for its gate came, or its wait timed out with
-- on_timeout 'run'): scheduled now with a new message, the run 'ready'.
CREATE OR REPLACE FUNCTION pgbus.workflow_wake(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, details jsonb DEFAULT '{}'
) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus.workflow_steps
    SET status = 'scheduled', scheduled_at = clock_timestamp(),
        msg_id = pgbus.workflow_send_step(run.workflow_id, attempt.step_id, attempt.queue, clock_timestamp())
    WHERE step_id = attempt.step_id;
    UPDATE pgbus.workflows SET status = 'ready', updated_at = now() WHERE workflow_id = run.workflow_id;
    PERFORM pgbus.workflow_event(run.workflow_id, 'step_woken', attempt.step_id, actor, NULL,
                                 jsonb_build_object('step', attempt.step_name) || coalesce(details, '{}'));
    RETURN 'ready';
END;
$$;

-- A parked fan-out step whose batch finished, or is gone: every member succeeded -> the step
-- completes and the run goes on; some were dead-lettered -> the step's on_batch_failure (pause,
-- cancel or skip) with pgbus.workflow.FanOutFailed recorded; the batch row is gone -> paused
-- (its outcome is unknown, whatever on_batch_failure says). NULL while the batch still runs.
CREATE OR REPLACE FUNCTION pgbus.workflow_resolve(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    b pgbus.batches;
    action text;
BEGIN
    SELECT * INTO b FROM pgbus.batches x WHERE x.batch_id = attempt.batch_id;
    IF NOT FOUND THEN
        RETURN pgbus.workflow_conclude(
            run, attempt, 'pause', 'paused', NULL,
            jsonb_build_object('class', 'pgbus.workflow.FanOutBatchGone',
                               'message', format('the batch of %s is gone: its outcome is unknown',
                                                 attempt.step_name)),
            NULL, actor, 'fan-out batch gone');
    ELSIF b.status <> 'finished' THEN
        RETURN NULL;
    END IF;
    PERFORM pgbus.workflow_event(run.workflow_id, 'fan_out_finished', attempt.step_id, actor, NULL,
                                 jsonb_build_object('step', attempt.step_name, 'batch_id', b.batch_id,
                                                    'jobs', b.total_jobs, 'dead_lettered', b.discarded_jobs));
    IF b.discarded_jobs = 0 THEN
        RETURN pgbus.workflow_conclude(run, attempt, 'resolve', 'ready', NULL, NULL, NULL, actor);
    END IF;
    action := coalesce(pgbus.workflow_step_definition(run.workflow_class, attempt.step_name)
                           ->> 'on_batch_failure', 'pause');
    RETURN pgbus.workflow_conclude(
        run, attempt, action, pgbus.workflow_transition('runner', action, 'running'), NULL,
        jsonb_build_object('class', 'pgbus.workflow.FanOutFailed',
                           'message', format('%s of %s jobs dead-lettered', b.discarded_jobs, b.total_jobs)),
        NULL, actor, 'fan-out failed');
END;
$$;

-- Whether what a waiting step waits for came meanwhile (after it parked, or while its run was
-- paused): a pending signal for its gate newer than `seen_signal` wakes it, as does a wait that
-- timed out with on_timeout 'run'; a finished (or gone) batch resolves it. Returns the run's
-- status.
CREATE OR REPLACE FUNCTION pgbus.workflow_settle_wait(
    run pgbus.workflows, attempt pgbus.workflow_steps, seen_signal bigint, actor text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    signal bigint;
BEGIN
    IF attempt.batch_id IS NOT NULL THEN
        RETURN coalesce(pgbus.workflow_resolve(run, attempt, actor), 'waiting');
    ELSIF attempt.timed_out THEN
        RETURN pgbus.workflow_wake(run, attempt, actor, jsonb_build_object('timed_out', true));
    END IF;
    SELECT g.signal_id INTO signal FROM pgbus.workflow_signals g
    WHERE g.workflow_id = run.workflow_id AND g.status = 'pending'
      AND (attempt.wait_for = '*' OR g.name = attempt.wait_for)
      AND g.signal_id > coalesce(seen_signal, 0)
    ORDER BY g.signal_id LIMIT 1;
    IF FOUND THEN
        RETURN pgbus.workflow_wake(run, attempt, actor, jsonb_build_object('signal_id', signal));
    END IF;
    RETURN 'waiting';
END;
$$;

-- Parks the run's current attempt ('park', or 'rewait' keeping its deadline) at its signal
-- gate, or on the batch it opens now from `fan_out`; the run waits ('paused' stays paused, the
-- wait's clock stopped). If what it waits for is already there, it moves on at once.
CREATE OR REPLACE FUNCTION pgbus.workflow_park(
    run pgbus.workflows, attempt pgbus.workflow_steps, verb text, fan_out jsonb,
    seen_signal bigint, reason text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    step jsonb := pgbus.workflow_step_definition(run.workflow_class, attempt.step_name);
    batch uuid;
    deadline timestamptz;
BEGIN
    IF fan_out IS NOT NULL THEN
        batch := pgbus.workflow_open_fan_out(run, attempt, fan_out);
        PERFORM pgbus.workflow_event(run.workflow_id, 'fan_out_opened', attempt.step_id, NULL, NULL,
                                     jsonb_build_object('step', attempt.step_name, 'batch_id', batch,
                                                        'jobs', jsonb_array_length(fan_out)));
    ELSIF NOT step ? 'wait_for' THEN
        RAISE EXCEPTION 'pgbus: step % parks without a signal gate or a fan-out batch', attempt.step_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    deadline := CASE WHEN verb = 'rewait' THEN attempt.wait_deadline
                     ELSE clock_timestamp() + make_interval(secs => (step ->> 'wait_timeout')::float8) END;
    UPDATE pgbus.workflow_steps
    SET status = 'waiting', outcome = verb, wait_for = step ->> 'wait_for', batch_id = batch,
        waiting_since = coalesce(waiting_since, clock_timestamp()),
        wait_deadline = CASE WHEN run.status = 'paused' THEN NULL ELSE deadline END,
        wait_remaining = CASE WHEN run.status = 'paused' AND deadline IS NOT NULL
                              THEN greatest(deadline - clock_timestamp(), interval '0') END,
        signal_id = attempt.signal_id
    WHERE step_id = attempt.step_id
    RETURNING * INTO attempt;
    PERFORM pgbus.workflow_event(run.workflow_id, 'step_waiting', attempt.step_id, NULL, reason,
                                 jsonb_strip_nulls(jsonb_build_object(
                                     'step', attempt.step_name, 'verb', verb, 'wait_for', attempt.wait_for,
                                     'batch_id', batch, 'deadline', deadline)));
    IF run.status = 'paused' THEN
        RETURN 'paused';  -- resume puts it back to waiting
    END IF;
    UPDATE pgbus.workflows SET status = 'waiting', updated_at = now() WHERE workflow_id = run.workflow_id;
    RETURN pgbus.workflow_settle_wait(run, attempt, seen_signal, NULL);
END;
$$;

-- A waiting step's wait timed out: its on_timeout applies (pause with
-- pgbus.workflow.WaitTimedOut recorded, cancel, skip, or run: the step runs with timed_out).
-- A signal that comes later stays pending. Returns the run's new status.
CREATE OR REPLACE FUNCTION pgbus.workflow_time_out(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text DEFAULT 'pgbus'
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    step jsonb := pgbus.workflow_step_definition(run.workflow_class, attempt.step_name);
    action text := coalesce(step ->> 'on_timeout', 'pause');
BEGIN
    PERFORM pgbus.workflow_event(run.workflow_id, 'wait_timed_out', attempt.step_id, actor, NULL,
                                 jsonb_strip_nulls(jsonb_build_object(
                                     'step', attempt.step_name, 'action', action,
                                     'wait_for', attempt.wait_for, 'batch_id', attempt.batch_id,
                                     'waiting_since', attempt.waiting_since)));
    IF action = 'run' THEN
        UPDATE pgbus.workflow_steps SET timed_out = true WHERE step_id = attempt.step_id;
        RETURN pgbus.workflow_wake(run, attempt, actor, jsonb_build_object('timed_out', true));
    END IF;
    RETURN pgbus.workflow_conclude(
        run, attempt, action, pgbus.workflow_transition('runner', action, 'running'), NULL,
        CASE WHEN action = 'pause' THEN jsonb_build_object(
            'class', 'pgbus.workflow.WaitTimedOut',
            'message', format('step %s waited longer than %s', attempt.step_name,
                              make_interval(secs => (step ->> 'wait_timeout')::float8))) END,
        NULL, actor, 'wait timed out');
END;
$$;

-- The fan-out batch of attempt `step_id` finished: called by its on_complete job (and by the
-- test helper). Takes the run's row lock. Answers {"ok": true, "status": ...}, or a refusal
-- {"ok": false, "code": "not_found" | "stale" | "not_allowed" | "running", "status": ...}:
-- stale when the attempt no longer waits on a batch (the run moved on, a fresh batch replaced
-- it), not_allowed while the run is paused (resume resolves it), running while the batch has
-- members left.
CREATE OR REPLACE FUNCTION pgbus.workflow_fan_out_finished(step_id bigint, actor text DEFAULT 'pgbus')
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    attempt pgbus.workflow_steps;
    run pgbus.workflows;
    new_status text;
BEGIN
    SELECT * INTO run FROM pgbus.workflows w
    WHERE w.workflow_id = (SELECT s.workflow_id FROM pgbus.workflow_steps s
                           WHERE s.step_id = workflow_fan_out_finished.step_id)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found');
    END IF;
    -- Read under the run's lock, which every writer of an attempt holds.
    SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = workflow_fan_out_finished.step_id;
    IF attempt.status <> 'waiting' OR attempt.batch_id IS NULL OR attempt.step_id IS DISTINCT FROM run.current_step_id THEN
        RETURN jsonb_build_object('ok', false, 'code', 'stale', 'status', run.status);
    ELSIF pgbus.workflow_transition('runner', 'resolve', run.status) IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_allowed', 'status', run.status);
    END IF;
    new_status := pgbus.workflow_resolve(run, attempt, actor);
    IF new_status IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'running', 'status', run.status);
    END IF;
    RETURN jsonb_build_object('ok', true, 'status', new_status, 'workflow_class', run.workflow_class,
                              'step', attempt.step_name);
END;
$$;

-- Ends the wait of a waiting run now, as its timeout would (the test helper expire_wait, or an
-- operator's tool). Takes the run's row lock. Answers {"ok": true, "status": ...} or
-- {"ok": false, "code": "not_found" | "not_allowed", "status": ...}.
CREATE OR REPLACE FUNCTION pgbus.workflow_expire_wait(workflow_id uuid, actor text DEFAULT 'pgbus')
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
BEGIN
    SELECT * INTO run FROM pgbus.workflows w WHERE w.workflow_id = workflow_expire_wait.workflow_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found');
    END IF;
    SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = run.current_step_id;
    IF run.status <> 'waiting' OR attempt.status IS DISTINCT FROM 'waiting' THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_allowed', 'status', run.status);
    END IF;
    RETURN jsonb_build_object('ok', true, 'status', pgbus.workflow_time_out(run, attempt, actor));
END;
$$;
