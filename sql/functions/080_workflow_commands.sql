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
-- lock, then done by the verb's own function, pgbus.workflow_command_<verb> (files
-- 081-084). Answers {"ok": true, "status": ...} (rerun adds "workflow_id" of the new run; signal
-- adds "signal_id", "duplicate_delivery" and "woke") or a refusal {"ok": false, "code":
-- "not_found" | "not_allowed" | "invalid" | "already_running", "status": ..., "message": ...};
-- a refusal changes nothing. An actor or reason longer than its limit raises 22023, a signal
-- payload over workflow_max_payload_size PB413 (errors, not refusals: see docs/sql-api.md).
CREATE OR REPLACE FUNCTION pgbus.workflow_command(
    workflow_id uuid, verb text, actor text DEFAULT NULL, reason text DEFAULT NULL,
    params jsonb DEFAULT '{}'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
    new_status text;
    answer jsonb;
BEGIN
    PERFORM pgbus.check_actor_reason(actor, reason);
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
    params := coalesce(params, '{}');
    answer := CASE verb
        WHEN 'pause' THEN pgbus.workflow_command_pause(run, attempt, actor, reason)
        WHEN 'cancel' THEN pgbus.workflow_command_cancel(run, attempt, actor, reason)
        WHEN 'resume' THEN pgbus.workflow_command_resume(run, attempt, actor, reason)
        WHEN 'resume_at' THEN pgbus.workflow_command_resume_at(run, attempt, actor, reason, params)
        WHEN 'run_now' THEN pgbus.workflow_command_reschedule(run, attempt, actor, reason, NULL)
        WHEN 'reschedule' THEN pgbus.workflow_command_reschedule(run, attempt, actor, reason, params)
        WHEN 'skip' THEN pgbus.workflow_command_skip(run, attempt, actor, reason, new_status)
        WHEN 'signal' THEN pgbus.workflow_command_signal(run, attempt, actor, reason, params, new_status)
        WHEN 'rerun' THEN pgbus.workflow_command_rerun(run, actor, reason)
    END;
    -- A verb's function answers a refusal, or its own answer, or NULL: done, say the status.
    RETURN coalesce(answer, jsonb_build_object('ok', true,
        'status', (SELECT w.status FROM pgbus.workflows w WHERE w.workflow_id = run.workflow_id)));
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

-- (Its earlier signatures: without waiting_threshold, then without only_class.)
DROP FUNCTION IF EXISTS pgbus.workflow_stuck(interval, interval);
DROP FUNCTION IF EXISTS pgbus.workflow_stuck(interval, interval, interval);

-- The open attempts that leave their run stuck (the classification's one definition, beside
-- the paused runs): a running attempt past its timeout (or stall_threshold), a scheduled one
-- due longer than overdue_after ago, a waiting one waiting longer than waiting_threshold. Each
-- with the run status it implies (a run whose status differs has moved on: not stuck through
-- it), why, its error class and since when. With only_class, attempts of other classes are left
-- out (run_class, written once as the run's class; NULL on attempts older than that column).
-- An attempt starts, waits or is overdue only at or after its scheduled_at, so only open
-- attempts due longer ago than the smallest threshold (workflow_steps_open_idx) can be stuck,
-- besides those with a timeout of their own (workflow_steps_open_timed_idx).
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck_attempts(
    stall_threshold interval, overdue_after interval, waiting_threshold interval,
    only_class text DEFAULT NULL
) RETURNS TABLE (step_id bigint, workflow_id uuid, run_status text, reason text,
                 error_class text, since timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.step_id, s.workflow_id,
           CASE s.status WHEN 'scheduled' THEN 'ready' ELSE s.status END,
           CASE s.status WHEN 'running' THEN 'stalled' WHEN 'waiting' THEN 'waiting_overdue'
                         ELSE 'overdue' END,
           s.error_class,
           CASE s.status WHEN 'running' THEN s.started_at WHEN 'waiting' THEN s.waiting_since
                         ELSE s.scheduled_at END
    FROM (SELECT o.* FROM pgbus.workflow_steps o
          WHERE o.ended_at IS NULL
            AND o.scheduled_at < now() - least(stall_threshold, overdue_after, waiting_threshold)
          UNION ALL
          SELECT o.* FROM pgbus.workflow_steps o
          WHERE o.ended_at IS NULL AND o.timeout IS NOT NULL
            AND o.scheduled_at >= now() - least(stall_threshold, overdue_after, waiting_threshold)) s
    WHERE (only_class IS NULL OR s.run_class = only_class OR s.run_class IS NULL)
      AND ((s.status = 'running' AND s.started_at < now() - coalesce(s.timeout, stall_threshold))
           OR (s.status = 'scheduled' AND s.scheduled_at < now() - overdue_after)
           OR (s.status = 'waiting' AND s.waiting_since < now() - waiting_threshold))
$$;

-- The runs stuck at an open attempt (pgbus.workflow_stuck's runs that are not paused): each
-- attempt's run looked up through workflows_ongoing_id_idx (ongoing runs only: a smaller index
-- than the primary key), kept while it is still at that attempt, unpaused, in the status the
-- attempt implies. Only only_class's runs when it is given. (A plain SELECT: inlined.)
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck_at_attempts(
    stall_threshold interval, overdue_after interval, waiting_threshold interval,
    only_class text DEFAULT NULL
) RETURNS TABLE (workflow_id uuid, workflow_class text, step_name text, reason text,
                 error_class text, since timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT w.workflow_id, w.workflow_class, w.current_step, a.reason, a.error_class, a.since
    FROM pgbus.workflow_stuck_attempts(stall_threshold, overdue_after, waiting_threshold, only_class) a
    JOIN pgbus.workflows w ON w.workflow_id = a.workflow_id AND w.current_step_id = a.step_id
    WHERE w.ended_at IS NULL AND w.pause_cause IS NULL AND w.status = a.run_status
      AND (only_class IS NULL OR w.workflow_class = only_class)
$$;

-- Runs that need a person, with why: paused_error (a step failed and the run paused),
-- stalled (its worker died or a step hung: paused by the stall action, or running past its
-- timeout / the stall threshold), paused_manual (paused by a step or an operator), overdue (its
-- step was due more than overdue_after ago and has not started), waiting_overdue (its step has
-- waited longer than waiting_threshold). Only the runs of only_class when it is given. The
-- gauge, the attention page and its bulk actions, the home card, insights and MCP all read
-- this, or (counting per class) its two parts: the paused runs and workflow_stuck_at_attempts.
--
-- Set-based, never a look-up per ongoing run: paused runs come from workflows_paused_idx with
-- their error class on the run; the others from their open attempt (workflow_stuck_at_attempts).
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck(
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days',
    only_class text DEFAULT NULL
) RETURNS TABLE (workflow_id uuid, workflow_class text, step_name text, reason text,
                 error_class text, since timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE w.pause_cause WHEN 'error' THEN 'paused_error' WHEN 'stall' THEN 'stalled'
                              ELSE 'paused_manual' END,
           w.error_class, w.updated_at
    FROM pgbus.workflows w
    WHERE w.pause_cause IS NOT NULL AND w.ended_at IS NULL  -- (paused: workflows_paused_idx)
      AND (only_class IS NULL OR w.workflow_class = only_class)
    UNION ALL
    SELECT * FROM pgbus.workflow_stuck_at_attempts(stall_threshold, overdue_after, waiting_threshold, only_class)
$$;

-- (The sweep, one function per repair: sql/functions/086_workflow_sweep.sql.)
