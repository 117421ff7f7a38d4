-- The outside verbs (operators, the app, agents), what they may do now, which runs are stuck,
-- and the sweep.

-- Takes a scheduled attempt out of play: it will never run (its message is deleted).
CREATE OR REPLACE FUNCTION pgbus.workflow_supersede(attempt_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    a pgbus.workflow_steps;
BEGIN
    UPDATE pgbus.workflow_steps SET status = 'superseded', ended_at = clock_timestamp()
    WHERE step_id = attempt_id AND status = 'scheduled'
    RETURNING * INTO a;
    IF FOUND AND a.msg_id IS NOT NULL THEN
        PERFORM pgmq.delete(a.queue, a.msg_id);
    END IF;
END;
$$;

-- The run moved on while this attempt ran (resume_at another step): when its worker ends it,
-- the end is stale and changes nothing; until then it is marked so the sweep leaves it be.
CREATE OR REPLACE FUNCTION pgbus.workflow_abandon(attempt_id bigint)
RETURNS void
LANGUAGE sql AS $$
    UPDATE pgbus.workflow_steps SET status = 'superseded', ended_at = clock_timestamp()
    WHERE step_id = attempt_id AND status = 'running'
$$;

-- An outside verb on a run: pause, cancel, resume, resume_at ({"step": ...}), run_now,
-- reschedule ({"at": ...}) or rerun. Checked against the transition table under the run's row
-- lock. Answers {"ok": true, "status": ...} (rerun adds "workflow_id" of the new run) or a
-- refusal {"ok": false, "code": "not_found" | "not_allowed" | "invalid" | "already_running",
-- "status": ..., "message": ...}; a refusal changes nothing.
CREATE OR REPLACE FUNCTION pgbus.workflow_command(
    workflow_id uuid, verb text, actor text DEFAULT NULL, reason text DEFAULT NULL,
    params jsonb DEFAULT '{}'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
    step jsonb;
    at timestamptz;
    new_status text;
    new_run uuid;
BEGIN
    IF verb IS NULL OR verb NOT IN (SELECT t.verb FROM pgbus.workflow_transitions t WHERE t.kind = 'outside') THEN
        RETURN jsonb_build_object('ok', false, 'code', 'invalid',
                                  'message', format('%s is not a workflow action', quote_nullable(verb)));
    END IF;
    SELECT * INTO run FROM pgbus.workflows w WHERE w.workflow_id = workflow_command.workflow_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found');
    END IF;
    new_status := pgbus.workflow_transition('outside', verb, run.status);
    IF new_status IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_allowed', 'status', run.status);
    END IF;
    SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = run.current_step_id;

    IF verb = 'pause' THEN
        PERFORM pgbus.workflow_supersede(attempt.step_id);
        UPDATE pgbus.workflows SET status = 'paused', pause_cause = 'manual', updated_at = now()
        WHERE workflows.workflow_id = run.workflow_id;
        PERFORM pgbus.workflow_event(run.workflow_id, 'paused', attempt.step_id, actor, reason);
    ELSIF verb = 'cancel' THEN
        PERFORM pgbus.workflow_supersede(attempt.step_id);
        PERFORM pgbus.workflow_end(run.workflow_id, 'cancelled', actor, reason);
    ELSIF verb = 'resume' THEN
        PERFORM pgbus.workflow_event(run.workflow_id, 'resumed', attempt.step_id, actor, reason,
                                     jsonb_build_object('step', run.current_step));
        IF attempt.status = 'running' THEN  -- paused while the step ran: it carries on
            UPDATE pgbus.workflows SET status = 'running', pause_cause = NULL, updated_at = now()
            WHERE workflows.workflow_id = run.workflow_id;
            new_status := 'running';
        ELSIF attempt.status IN ('completed', 'skipped') THEN
            new_status := pgbus.workflow_advance(run, attempt.step_name, actor);
        ELSE  -- failed, interrupted, stalled or never ran: the same step again
            PERFORM pgbus.workflow_schedule_step(
                run, coalesce(pgbus.workflow_step_definition(run.workflow_class, run.current_step),
                              jsonb_build_object('name', run.current_step, 'queue', attempt.queue)),
                clock_timestamp(), actor);
        END IF;
    ELSIF verb = 'resume_at' THEN
        step := pgbus.workflow_step_definition(run.workflow_class, params ->> 'step');
        IF step IS NULL OR coalesce((step ->> 'removed')::boolean, false) THEN
            RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'status', run.status,
                                      'message', format('%s has no step %s', run.workflow_class,
                                                        quote_nullable(params ->> 'step')));
        END IF;
        PERFORM pgbus.workflow_event(run.workflow_id, 'resumed_at', attempt.step_id, actor, reason,
                                     jsonb_build_object('step', step ->> 'name'));
        PERFORM pgbus.workflow_supersede(attempt.step_id);
        PERFORM pgbus.workflow_abandon(attempt.step_id);
        PERFORM pgbus.workflow_schedule_step(run, step, clock_timestamp(), actor);
    ELSIF verb IN ('run_now', 'reschedule') THEN
        BEGIN
            at := CASE WHEN verb = 'run_now' THEN clock_timestamp() ELSE (params ->> 'at')::timestamptz END;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
            at := NULL;
        END;
        IF at IS NULL THEN
            RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'status', run.status,
                                      'message', 'reschedule needs a time: {"at": "<ISO 8601 timestamp>"}');
        END IF;
        UPDATE pgbus.workflow_steps SET scheduled_at = at WHERE step_id = attempt.step_id;
        PERFORM pgmq.set_vt(attempt.queue, attempt.msg_id, greatest(at, clock_timestamp()));
        PERFORM pgbus.workflow_event(run.workflow_id, CASE verb WHEN 'run_now' THEN 'run_now' ELSE 'rescheduled' END,
                                     attempt.step_id, actor, reason,
                                     jsonb_build_object('step', attempt.step_name, 'scheduled_at', at));
    ELSIF verb = 'rerun' THEN
        BEGIN
            SELECT s.workflow_id INTO new_run
            FROM pgbus.workflow_start(run.workflow_class, run.subject_type, run.subject_id,
                                      run.arguments, NULL, actor, run.workflow_id) s;
        EXCEPTION WHEN SQLSTATE 'PB409' THEN
            RETURN jsonb_build_object('ok', false, 'code', 'already_running', 'status', run.status,
                                      'message', 'the subject already has an ongoing run');
        END;
        PERFORM pgbus.workflow_event(run.workflow_id, 'rerun', NULL, actor, reason,
                                     jsonb_build_object('workflow_id', new_run));
        RETURN jsonb_build_object('ok', true, 'status', run.status, 'workflow_id', new_run);
    END IF;
    RETURN jsonb_build_object('ok', true,
                              'status', (SELECT w.status FROM pgbus.workflows w WHERE w.workflow_id = run.workflow_id));
END;
$$;

-- The outside verbs the run allows now: the transition table for its status, less run_now when
-- its step is already due.
CREATE OR REPLACE FUNCTION pgbus.workflow_available_actions(workflow_id uuid)
RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(
        SELECT t.verb
        FROM pgbus.workflows w
        JOIN pgbus.workflow_transitions t ON t.kind = 'outside' AND t.from_status = w.status
        LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        WHERE w.workflow_id = workflow_available_actions.workflow_id
          AND (t.verb <> 'run_now' OR (s.status = 'scheduled' AND s.scheduled_at > clock_timestamp()))
        ORDER BY array_position(ARRAY['resume', 'resume_at', 'run_now', 'reschedule', 'pause',
                                      'cancel', 'rerun'], t.verb));
END;
$$;

-- Runs that need a person, with why: paused_error (a step failed and the run paused),
-- stalled (its worker died or a step hung: paused by the stall action, or running past its
-- timeout / the stall threshold), paused_manual (paused by a step or an operator), overdue (its
-- step was due more than overdue_after ago and has not started). The gauge, the attention page
-- and MCP all read this.
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck(
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes'
) RETURNS TABLE (workflow_id uuid, workflow_class text, step_name text, reason text,
                 error_class text, since timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE
               WHEN w.status = 'paused' AND w.pause_cause = 'error' THEN 'paused_error'
               WHEN w.status = 'paused' AND w.pause_cause = 'stall' THEN 'stalled'
               WHEN w.status = 'paused' THEN 'paused_manual'
               WHEN w.status = 'running' THEN 'stalled'
               ELSE 'overdue'
           END,
           s.error_class,
           CASE WHEN w.status = 'paused' THEN w.updated_at
                WHEN w.status = 'running' THEN s.started_at
                ELSE s.scheduled_at END
    FROM pgbus.workflows w
    LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
    WHERE w.ended_at IS NULL  -- (ongoing: lets the planner use workflows_ongoing_idx)
      AND (w.status = 'paused'
           OR (w.status = 'running' AND s.status = 'running'
               AND s.started_at < now() - coalesce(s.timeout, stall_threshold))
           OR (w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - overdue_after))
$$;

-- The dispatcher's workflow duty, one call (pg_cron can run it): stalls attempts running past
-- their timeout or the stall threshold and applies `stall_action`; sends again the scheduled
-- steps whose message is lost; deletes finished and cancelled runs older than `retention`;
-- answers what it did ("stalled": the runs it stalled; "resent", "deleted": counts) and the
-- gauge numbers ("runs" ongoing by class and status, "stuck" by class and reason).
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep(
    stall_threshold interval DEFAULT interval '15 minutes',
    stall_action text DEFAULT 'pause',
    retention interval DEFAULT interval '30 days',
    resend_after interval DEFAULT interval '1 minute'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    stalls jsonb := '[]';
    resent integer := 0;
    deleted integer;
    exists_ boolean;
    msg bigint;
BEGIN
    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        WHERE w.status IN ('running', 'paused') AND s.status = 'running'
          AND s.started_at < now() - coalesce(s.timeout, stall_threshold)
          -- (True of every running attempt: they let the planner start from the open attempts,
          -- through workflow_steps_open_idx, and find each one's run by its key.)
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id
        ORDER BY s.started_at
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        PERFORM pgbus.workflow_stall(r.run, r.attempt, 'sweep', stall_action);
        stalls := stalls || jsonb_build_object('workflow_id', (r.run).workflow_id,
                                               'workflow_class', (r.run).workflow_class,
                                               'step', (r.attempt).step_name, 'action', stall_action);
    END LOOP;

    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        WHERE w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - resend_after
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id  -- (as above)
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgmq.%I WHERE msg_id = $1)',
                       pgmq.format_table_name((r.attempt).queue, 'q'))
            INTO exists_ USING (r.attempt).msg_id;
        CONTINUE WHEN exists_;
        SELECT e INTO msg FROM pgbus.enqueue(
            (r.attempt).queue, pgbus.step_job_class(),
            ARRAY[jsonb_build_object('kwargs', jsonb_build_object(
                'workflow_id', (r.run).workflow_id, 'step_id', (r.attempt).step_id))]) AS e;
        UPDATE pgbus.workflow_steps SET msg_id = msg WHERE step_id = (r.attempt).step_id;
        PERFORM pgbus.workflow_event((r.run).workflow_id, 'step_resent', (r.attempt).step_id, 'pgbus',
                                     'its message was lost', jsonb_build_object('step', (r.attempt).step_name));
        resent := resent + 1;
    END LOOP;

    WITH gone AS (
        DELETE FROM pgbus.workflows
        WHERE status IN ('finished', 'cancelled') AND ended_at < now() - retention
        RETURNING 1
    )
    SELECT count(*) INTO deleted FROM gone;

    RETURN jsonb_build_object(
        'stalled', stalls, 'resent', resent, 'deleted', deleted,
        'runs', coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_class', c.workflow_class,
                                                               'status', c.status, 'count', c.n))
                          FROM (SELECT w.workflow_class, w.status, count(*) AS n FROM pgbus.workflows w
                                WHERE w.ended_at IS NULL  -- ongoing
                                GROUP BY 1, 2) c), '[]'),
        'stuck', coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_class', k.workflow_class,
                                                                'reason', k.reason, 'count', k.n))
                           FROM (SELECT x.workflow_class, x.reason, count(*) AS n
                                 FROM pgbus.workflow_stuck(stall_threshold) x GROUP BY 1, 2) k), '[]'));
END;
$$;
