-- Workflow runs: definitions, the transition check, scheduling a step, starting a run, the
-- audit trail. Every change of a run happens under its row lock (SELECT ... FOR UPDATE).

-- Registers (or updates) a workflow class's definition; returns its digest.
CREATE OR REPLACE FUNCTION pgbus.workflow_register(
    workflow_class text, steps jsonb, digest text, queue text, removed_steps text[] DEFAULT '{}'
) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(btrim(workflow_class), '') = '' OR coalesce(btrim(digest), '') = '' THEN
        RAISE EXCEPTION 'pgbus: a workflow definition needs a class name and a digest'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(steps) IS DISTINCT FROM 'array' OR EXISTS (
        SELECT 1 FROM jsonb_array_elements(steps) s
        WHERE jsonb_typeof(s) <> 'object' OR coalesce(s ->> 'name', '') = ''
    ) THEN
        RAISE EXCEPTION 'pgbus: workflow steps are [{"name": ...}, ...], got %', steps
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (
        SELECT 1 FROM jsonb_array_elements(steps) s
        WHERE (s ? 'wait_for' AND (coalesce(btrim(s ->> 'wait_for'), '') = '' OR length(s ->> 'wait_for') > 255))
           OR coalesce(s ->> 'on_timeout', 'pause') NOT IN ('pause', 'cancel', 'skip', 'run')
           OR coalesce(s ->> 'on_batch_failure', 'pause') NOT IN ('pause', 'cancel', 'skip')
           OR (s ? 'wait_timeout' AND NOT (s ? 'wait_for' OR s ? 'fan_out'))
           OR (s ? 'fan_out' AND (s ? 'wait_for' OR s ->> 'on_timeout' = 'run'))
    ) THEN
        RAISE EXCEPTION 'pgbus: a waiting step has a wait_for of 1-255 characters or is a fan_out, '
                        'on_timeout pause, cancel, skip or run (not run for a fan_out), on_batch_failure '
                        'pause, cancel or skip; got %', steps
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Every queue its steps use exists from now on, so scheduling a step can send right away.
    PERFORM pgbus.ensure_queue(q)
    FROM (SELECT queue AS q UNION SELECT s ->> 'queue' FROM jsonb_array_elements(steps) s
          WHERE s ? 'queue') AS queues;
    -- registered_at: when this definition became the class's, by the clock (not the
    -- transaction's start): a run created since then started on it or on an older one whose
    -- digest it carries (the insights list relies on it, sql/functions/510).
    INSERT INTO pgbus.workflow_definitions AS d (workflow_class, steps, removed_steps, digest, queue, registered_at)
    VALUES (workflow_class, steps, coalesce(removed_steps, '{}'), digest, queue, clock_timestamp())
    ON CONFLICT ON CONSTRAINT workflow_definitions_pkey DO UPDATE
        SET steps = excluded.steps, removed_steps = excluded.removed_steps,
            digest = excluded.digest, queue = excluded.queue, registered_at = clock_timestamp()
        WHERE d.digest IS DISTINCT FROM excluded.digest OR d.queue IS DISTINCT FROM excluded.queue;
    RETURN digest;
END;
$$;

-- The status a verb leads to, or NULL when the transition table does not allow it.
CREATE OR REPLACE FUNCTION pgbus.workflow_transition(kind text, verb text, from_status text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT t.to_status FROM pgbus.workflow_transitions t
            WHERE t.kind = workflow_transition.kind AND t.verb = workflow_transition.verb
              AND t.from_status = workflow_transition.from_status);
END;
$$;

-- (PL/pgSQL rather than SQL here and in the helpers below: a SQL function's body is parsed
-- and planned again on every call, a PL/pgSQL one's plans are kept for the session, and
-- these run several times per step.)
CREATE OR REPLACE FUNCTION pgbus.workflow_event(
    run uuid, event text, step bigint DEFAULT NULL, actor text DEFAULT NULL,
    reason text DEFAULT NULL, details jsonb DEFAULT '{}'
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus.workflow_events (workflow_id, step_id, event, actor, reason, details)
    VALUES (run, step, event, actor, nullif(btrim(reason), ''), coalesce(details, '{}'));
END;
$$;

-- The definition's entry for a step, or NULL when the class does not know it.
CREATE OR REPLACE FUNCTION pgbus.workflow_step_definition(workflow_class text, step_name text)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s FROM pgbus.workflow_definitions d, jsonb_array_elements(d.steps) s
            WHERE d.workflow_class = workflow_step_definition.workflow_class AND s ->> 'name' = step_name);
END;
$$;

-- The first step after `after_step` (the first step when NULL) that is not a gravestone, or
-- NULL when there is none.
CREATE OR REPLACE FUNCTION pgbus.workflow_next_step(workflow_class text, after_step text)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        WITH ordered AS (
            SELECT s, i FROM pgbus.workflow_definitions d,
                   jsonb_array_elements(d.steps) WITH ORDINALITY AS t(s, i)
            WHERE d.workflow_class = workflow_next_step.workflow_class
        )
        SELECT o.s FROM ordered o
        WHERE o.i > coalesce((SELECT p.i FROM ordered p WHERE p.s ->> 'name' = after_step), 0)
          AND NOT coalesce((o.s ->> 'removed')::boolean, false)
        ORDER BY o.i LIMIT 1);
END;
$$;

-- Sends attempt `step_id`'s StepJob message, visible at `at`; returns its id. The queue exists
-- (workflow_register created it), so it goes straight to the queue.
CREATE OR REPLACE FUNCTION pgbus.workflow_send_step(run uuid, step_id bigint, queue text, at timestamptz)
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgbus.queue_send(queue,
                            pgbus.job_envelope(queue, pgbus.step_job_class(),
                                               jsonb_build_object('kwargs', jsonb_build_object(
                                                   'workflow_id', run, 'step_id', step_id)),
                                               CASE WHEN at > clock_timestamp() THEN at END, NULL),
                            greatest(at, clock_timestamp()));
END;
$$;

-- Schedules an attempt of `step` at `at`: the attempt row, its StepJob message (visible at
-- `at`), the run's current step. Leaves the run 'ready'. Returns the attempt's id.
CREATE OR REPLACE FUNCTION pgbus.workflow_schedule_step(
    run pgbus.workflows, step jsonb, at timestamptz, actor text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    queue text := step ->> 'queue';
    attempt_no integer;
    -- The id first, so the message can name it and the row is written once.
    id bigint := nextval('pgbus.workflow_steps_step_id_seq');
    msg bigint;
BEGIN
    IF queue IS NULL THEN
        SELECT d.queue INTO queue FROM pgbus.workflow_definitions d WHERE d.workflow_class = run.workflow_class;
    END IF;
    SELECT coalesce(max(s.attempt), 0) + 1 INTO attempt_no
    FROM pgbus.workflow_steps s WHERE s.workflow_id = run.workflow_id AND s.step_name = step ->> 'name';
    msg := pgbus.workflow_send_step(run.workflow_id, id, queue, at);
    INSERT INTO pgbus.workflow_steps (step_id, workflow_id, step_name, attempt, queue, msg_id,
                                      scheduled_at, timeout, run_class)
    OVERRIDING SYSTEM VALUE
    VALUES (id, run.workflow_id, step ->> 'name', attempt_no, queue, msg, at,
            make_interval(secs => (step ->> 'timeout')::float8), run.workflow_class);
    UPDATE pgbus.workflows
    SET status = 'ready', pause_cause = NULL, current_step = step ->> 'name', current_step_id = id,
        updated_at = now()
    WHERE workflow_id = run.workflow_id;
    PERFORM pgbus.workflow_event(run.workflow_id, 'step_scheduled', id, actor, NULL,
                                 jsonb_build_object('step', step ->> 'name', 'attempt', attempt_no,
                                                    'scheduled_at', at));
    RETURN id;
END;
$$;

-- Ends a run: finished or cancelled.
CREATE OR REPLACE FUNCTION pgbus.workflow_end(
    run uuid, final_status text, actor text DEFAULT NULL, reason text DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus.workflows
    SET status = final_status, pause_cause = NULL, ended_at = clock_timestamp(), updated_at = now()
    WHERE workflow_id = run;
    PERFORM pgbus.workflow_event(run, final_status, NULL, actor, reason);
END;
$$;

-- Continues a run after `after_step` (or from the first step): schedules the next step after
-- its wait, or finishes the run when there is none. Returns the run's new status.
CREATE OR REPLACE FUNCTION pgbus.workflow_advance(run pgbus.workflows, after_step text, actor text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    step jsonb := pgbus.workflow_next_step(run.workflow_class, after_step);
BEGIN
    IF step IS NULL THEN
        PERFORM pgbus.workflow_end(run.workflow_id, 'finished', actor);
        RETURN 'finished';
    END IF;
    PERFORM pgbus.workflow_schedule_step(
        run, step, clock_timestamp() + make_interval(secs => coalesce((step ->> 'wait')::float8, 0)), actor);
    RETURN 'ready';
END;
$$;

-- Starts a run: the run row, its first step and that step's message, and the events, in the
-- caller's transaction (so inside an app transaction nothing is sent before it commits).
-- With an idempotency key already used for this class, answers that run with
-- duplicate_start. A second ongoing run for the same (class, subject) raises PB409, an
-- unregistered class PB404, arguments over workflow_max_payload_size PB413, a too long actor 22023.
CREATE OR REPLACE FUNCTION pgbus.workflow_start(
    workflow_class text,
    subject_type text DEFAULT NULL,
    subject_id text DEFAULT NULL,
    arguments jsonb DEFAULT '{}',
    idempotency_key text DEFAULT NULL,
    actor text DEFAULT NULL,
    rerun_of uuid DEFAULT NULL
) RETURNS TABLE (workflow_id uuid, duplicate_start boolean)
LANGUAGE plpgsql AS $$
DECLARE
    def pgbus.workflow_definitions;
    run pgbus.workflows;
    key text := pgbus.idempotency_key(idempotency_key);
    existing uuid;
BEGIN
    SELECT * INTO def FROM pgbus.workflow_definitions d WHERE d.workflow_class = workflow_start.workflow_class;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgbus: workflow class % is not registered', workflow_class
            USING ERRCODE = 'PB404', HINT = 'register it first: pgbus.workflow_register';
    END IF;
    PERFORM pgbus.check_actor_reason(actor, NULL);
    IF jsonb_typeof(coalesce(arguments, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'pgbus: workflow arguments must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (subject_type IS NULL) <> (subject_id IS NULL) THEN
        RAISE EXCEPTION 'pgbus: a subject needs both a type and an id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF key IS NOT NULL THEN
        -- Serialises starts with the same key, so the second one finds the first.
        PERFORM pg_advisory_xact_lock(hashtext('pgbus.workflow_start'), hashtext(workflow_class || ':' || key));
        SELECT w.workflow_id INTO existing FROM pgbus.workflows w
        WHERE w.workflow_class = workflow_start.workflow_class AND w.idempotency_key = key;
        IF FOUND THEN
            RETURN QUERY SELECT existing, true;
            RETURN;
        END IF;
    END IF;
    IF subject_id IS NOT NULL THEN
        SELECT w.workflow_id INTO existing FROM pgbus.workflows w
        WHERE w.workflow_class = workflow_start.workflow_class AND w.subject_type = workflow_start.subject_type
          AND w.subject_id = workflow_start.subject_id AND w.ended_at IS NULL;  -- ongoing
        IF FOUND THEN
            RAISE EXCEPTION 'pgbus: % already has an ongoing run for % %', workflow_class, subject_type, subject_id
                USING ERRCODE = 'PB409', DETAIL = existing::text;
        END IF;
    END IF;
    BEGIN
        INSERT INTO pgbus.workflows (workflow_class, subject_type, subject_id, arguments,
                                     idempotency_key, definition_digest, rerun_of)
        VALUES (workflow_class, subject_type, subject_id, coalesce(arguments, '{}'), key, def.digest,
                workflow_start.rerun_of)
        RETURNING * INTO run;
    EXCEPTION WHEN unique_violation THEN
        -- Another session started one for this subject at the same moment.
        RAISE EXCEPTION 'pgbus: % already has an ongoing run for % %', workflow_class, subject_type, subject_id
            USING ERRCODE = 'PB409';
    END;
    PERFORM pgbus.workflow_event(run.workflow_id, 'started', NULL, actor, NULL,
                                 jsonb_strip_nulls(jsonb_build_object('rerun_of', workflow_start.rerun_of)));
    PERFORM pgbus.workflow_advance(run, NULL, actor);
    RETURN QUERY SELECT run.workflow_id, false;
END;
$$;
