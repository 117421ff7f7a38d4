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

-- The run moved on while this attempt ran or waited (resume_at another step): when its worker
-- ends it, the end is stale and changes nothing; until then it is marked so the sweep leaves
-- it be.
CREATE OR REPLACE FUNCTION pgbus.workflow_abandon(attempt_id bigint)
RETURNS void
LANGUAGE sql AS $$
    UPDATE pgbus.workflow_steps SET status = 'superseded', ended_at = clock_timestamp()
    WHERE step_id = attempt_id AND status IN ('running', 'waiting')
$$;

-- An outside verb on a run: pause, cancel, resume, resume_at ({"step": ...}), run_now,
-- reschedule ({"at": ...}), rerun, skip (the step a waiting run waits on) or signal ({"name",
-- "payload", "idempotency_key"}). Checked against the transition table under the run's row
-- lock. Answers {"ok": true, "status": ...} (rerun adds "workflow_id" of the new run; signal
-- adds "signal_id", "duplicate_delivery" and "woke") or a refusal {"ok": false, "code":
-- "not_found" | "not_allowed" | "invalid" | "already_running", "status": ..., "message": ...};
-- a refusal changes nothing.
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
    signal pgbus.workflow_signals;
    woke boolean := false;
    signal_name text := btrim(params ->> 'name');
    signal_key text := nullif(btrim(params ->> 'idempotency_key'), '');  -- a blank key is no key
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
        IF attempt.status = 'scheduled' AND attempt.waiting_since IS NOT NULL THEN
            -- Woken but not yet run: it waits again (resume wakes it once more).
            PERFORM pgmq.delete(attempt.queue, attempt.msg_id);
            UPDATE pgbus.workflow_steps SET status = 'waiting' WHERE step_id = attempt.step_id;
        END IF;
        PERFORM pgbus.workflow_supersede(attempt.step_id);
        -- A waiting step's clock stops: time spent paused does not count against its wait.
        UPDATE pgbus.workflow_steps
        SET wait_remaining = greatest(wait_deadline - clock_timestamp(), interval '0'), wait_deadline = NULL
        WHERE step_id = attempt.step_id AND status = 'waiting' AND wait_deadline IS NOT NULL;
        UPDATE pgbus.workflows SET status = 'paused', pause_cause = 'manual', updated_at = now()
        WHERE workflows.workflow_id = run.workflow_id;
        PERFORM pgbus.workflow_event(run.workflow_id, 'paused', attempt.step_id, actor, reason);
    ELSIF verb = 'cancel' THEN
        PERFORM pgbus.workflow_supersede(attempt.step_id);
        UPDATE pgbus.workflow_steps SET status = 'cancelled', outcome = 'cancel', ended_at = clock_timestamp()
        WHERE step_id = attempt.step_id AND status = 'waiting';
        PERFORM pgbus.workflow_end(run.workflow_id, 'cancelled', actor, reason);
    ELSIF verb = 'resume' THEN
        PERFORM pgbus.workflow_event(run.workflow_id, 'resumed', attempt.step_id, actor, reason,
                                     jsonb_build_object('step', run.current_step));
        IF attempt.status = 'running' THEN  -- paused while the step ran: it carries on
            UPDATE pgbus.workflows SET status = 'running', pause_cause = NULL, updated_at = now()
            WHERE workflows.workflow_id = run.workflow_id;
            new_status := 'running';
        ELSIF attempt.status = 'waiting' THEN  -- paused while its step waited: it waits again
            UPDATE pgbus.workflows SET status = 'waiting', pause_cause = NULL, updated_at = now()
            WHERE workflows.workflow_id = run.workflow_id;
            UPDATE pgbus.workflow_steps
            SET wait_deadline = clock_timestamp() + wait_remaining, wait_remaining = NULL
            WHERE step_id = attempt.step_id AND wait_remaining IS NOT NULL;
            SELECT * INTO run FROM pgbus.workflows w WHERE w.workflow_id = run.workflow_id;
            SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = run.current_step_id;
            new_status := pgbus.workflow_settle_wait(run, attempt, NULL, actor);
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
    ELSIF verb = 'skip' THEN
        PERFORM pgbus.workflow_conclude(run, attempt, 'skip', new_status, NULL, NULL, NULL,
                                        coalesce(actor, 'operator'), reason);
    ELSIF verb = 'signal' THEN
        IF coalesce(signal_name, '') = '' OR length(signal_name) > 255 OR length(signal_key) > 255
           OR jsonb_typeof(coalesce(params -> 'payload', '{}')) <> 'object' THEN
            RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'status', run.status,
                                      'message', 'a signal is {"name": 1-255 characters, "payload": {...}, '
                                                 '"idempotency_key": at most 255 characters}');
        END IF;
        IF signal_key IS NOT NULL THEN  -- under the run's lock: the same key twice stores one
            SELECT * INTO signal FROM pgbus.workflow_signals g
            WHERE g.workflow_id = run.workflow_id AND g.idempotency_key = signal_key;
            IF FOUND THEN
                RETURN jsonb_build_object('ok', true, 'status', run.status, 'signal_id', signal.signal_id,
                                          'duplicate_delivery', true, 'woke', false);
            END IF;
        END IF;
        INSERT INTO pgbus.workflow_signals (workflow_id, name, payload, idempotency_key, actor, reason)
        VALUES (run.workflow_id, signal_name, coalesce(params -> 'payload', '{}'), signal_key, actor,
                nullif(btrim(reason), ''))
        RETURNING * INTO signal;
        PERFORM pgbus.workflow_event(run.workflow_id, 'signal_received', attempt.step_id, actor, reason,
                                     jsonb_strip_nulls(jsonb_build_object(
                                         'signal_id', signal.signal_id, 'name', signal_name,
                                         'idempotency_key', signal_key)));
        IF attempt.status = 'waiting' AND attempt.wait_for IN (signal_name, '*')
           AND pgbus.workflow_transition('runner', 'wake', run.status) IS NOT NULL THEN
            new_status := pgbus.workflow_wake(run, attempt, actor,
                                              jsonb_build_object('signal_id', signal.signal_id));
            woke := true;
        END IF;
        RETURN jsonb_build_object('ok', true, 'status', new_status, 'signal_id', signal.signal_id,
                                  'duplicate_delivery', false, 'woke', woke);
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
        ORDER BY array_position(ARRAY['resume', 'resume_at', 'run_now', 'reschedule', 'skip',
                                      'signal', 'pause', 'cancel', 'rerun'], t.verb));
END;
$$;

-- (Its earlier signature, without waiting_threshold.)
DROP FUNCTION IF EXISTS pgbus.workflow_stuck(interval, interval);

-- Runs that need a person, with why: paused_error (a step failed and the run paused),
-- stalled (its worker died or a step hung: paused by the stall action, or running past its
-- timeout / the stall threshold), paused_manual (paused by a step or an operator), overdue (its
-- step was due more than overdue_after ago and has not started), waiting_overdue (its step has
-- waited longer than waiting_threshold). The gauge, the attention page and MCP all read this.
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck(
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS TABLE (workflow_id uuid, workflow_class text, step_name text, reason text,
                 error_class text, since timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE
               WHEN w.status = 'paused' AND w.pause_cause = 'error' THEN 'paused_error'
               WHEN w.status = 'paused' AND w.pause_cause = 'stall' THEN 'stalled'
               WHEN w.status = 'paused' THEN 'paused_manual'
               WHEN w.status = 'running' THEN 'stalled'
               WHEN w.status = 'waiting' THEN 'waiting_overdue'
               ELSE 'overdue'
           END,
           s.error_class,
           CASE WHEN w.status = 'paused' THEN w.updated_at
                WHEN w.status = 'running' THEN s.started_at
                WHEN w.status = 'waiting' THEN s.waiting_since
                ELSE s.scheduled_at END
    FROM pgbus.workflows w
    LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
    WHERE w.ended_at IS NULL  -- (ongoing: lets the planner use workflows_ongoing_idx)
      AND (w.status = 'paused'
           OR (w.status = 'running' AND s.status = 'running'
               AND s.started_at < now() - coalesce(s.timeout, stall_threshold))
           OR (w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - overdue_after)
           OR (w.status = 'waiting' AND s.status = 'waiting' AND s.waiting_since < now() - waiting_threshold))
$$;

-- (Its earlier signature, without overdue_after and waiting_threshold.)
DROP FUNCTION IF EXISTS pgbus.workflow_sweep(interval, text, interval, interval);

-- The dispatcher's workflow duty, one call (pg_cron can run it): stalls attempts running past
-- their timeout or the stall threshold and applies `stall_action`; applies the wait timeout of
-- waiting steps past their deadline; resolves fan-out steps whose batch finished more than
-- `resend_after` ago without its callback arriving, and pauses those whose batch is gone;
-- sends again the scheduled steps whose message is lost; deletes finished and cancelled runs
-- older than `retention`; answers what it did ("stalled", "timed_out": the runs concerned;
-- "resolved", "resent", "deleted": counts) and the gauge numbers ("runs" ongoing by class and
-- status, "stuck" by class and reason as pgbus.workflow_stuck tells it).
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep(
    stall_threshold interval DEFAULT interval '15 minutes',
    stall_action text DEFAULT 'pause',
    retention interval DEFAULT interval '30 days',
    resend_after interval DEFAULT interval '1 minute',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    stalls jsonb := '[]';
    timeouts jsonb := '[]';
    resolved integer := 0;
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
        WHERE w.status = 'waiting' AND s.status = 'waiting' AND s.wait_deadline < clock_timestamp()
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id  -- (as above)
        ORDER BY s.wait_deadline
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        timeouts := timeouts || jsonb_build_object(
            'workflow_id', (r.run).workflow_id, 'workflow_class', (r.run).workflow_class,
            'step', (r.attempt).step_name,
            'action', coalesce(pgbus.workflow_step_definition((r.run).workflow_class, (r.attempt).step_name)
                                   ->> 'on_timeout', 'pause'),
            'status', pgbus.workflow_time_out(r.run, r.attempt));
    END LOOP;

    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        LEFT JOIN pgbus.batches b ON b.batch_id = s.batch_id
        WHERE w.status = 'waiting' AND s.status = 'waiting' AND s.batch_id IS NOT NULL
          AND (b.batch_id IS NULL OR (b.status = 'finished' AND b.finished_at < now() - resend_after))
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id  -- (as above)
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        PERFORM pgbus.workflow_event((r.run).workflow_id, 'fan_out_repaired', (r.attempt).step_id, 'pgbus',
                                     'its batch callback was lost', jsonb_build_object('step', (r.attempt).step_name));
        PERFORM pgbus.workflow_resolve(r.run, r.attempt, 'pgbus');
        resolved := resolved + 1;
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
        'stalled', stalls, 'timed_out', timeouts, 'resolved', resolved, 'resent', resent, 'deleted', deleted,
        'runs', coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_class', c.workflow_class,
                                                               'status', c.status, 'count', c.n))
                          FROM (SELECT w.workflow_class, w.status, count(*) AS n FROM pgbus.workflows w
                                WHERE w.ended_at IS NULL  -- ongoing
                                GROUP BY 1, 2) c), '[]'),
        'stuck', coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_class', k.workflow_class,
                                                                'reason', k.reason, 'count', k.n))
                           FROM (SELECT x.workflow_class, x.reason, count(*) AS n
                                 FROM pgbus.workflow_stuck(stall_threshold, overdue_after, waiting_threshold) x
                                 GROUP BY 1, 2) k), '[]'));
END;
$$;
