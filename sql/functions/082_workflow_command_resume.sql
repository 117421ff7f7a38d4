-- The outside verbs resume and resume_at (dispatched by pgbus.workflow_command under the run's
-- row lock). NULL: done; a refusal answers itself.

-- A failed step runs again; a completed or skipped one is followed by the next (also one that
-- failed but whose exception policy skipped it while the run was paused); a step the run paused
-- while it ran carries on; one paused while it waited waits again.
CREATE OR REPLACE FUNCTION pgbus.workflow_command_resume(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgbus.workflow_event(run.workflow_id, 'resumed', attempt.step_id, actor, reason,
                                 jsonb_build_object('step', run.current_step));
    IF attempt.status = 'running' THEN  -- paused while the step ran: it carries on
        UPDATE pgbus.workflows SET status = 'running', pause_cause = NULL, updated_at = now()
        WHERE workflows.workflow_id = run.workflow_id;
    ELSIF attempt.status = 'waiting' THEN  -- paused while its step waited: it waits again
        UPDATE pgbus.workflows SET status = 'waiting', pause_cause = NULL, updated_at = now()
        WHERE workflows.workflow_id = run.workflow_id;
        UPDATE pgbus.workflow_steps
        SET wait_deadline = clock_timestamp() + wait_remaining, wait_remaining = NULL
        WHERE step_id = attempt.step_id AND wait_remaining IS NOT NULL;
        SELECT * INTO run FROM pgbus.workflows w WHERE w.workflow_id = run.workflow_id;
        SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = run.current_step_id;
        PERFORM pgbus.workflow_settle_wait(run, attempt, NULL, actor);
    ELSIF attempt.status IN ('completed', 'skipped')
          OR (attempt.status = 'failed' AND attempt.outcome IN ('complete', 'skip')) THEN
        PERFORM pgbus.workflow_advance(run, attempt.step_name, actor);
    ELSE  -- failed, interrupted, stalled or never ran: the same step again
        PERFORM pgbus.workflow_schedule_step(
            run, coalesce(pgbus.workflow_step_definition(run.workflow_class, run.current_step),
                          jsonb_build_object('name', run.current_step, 'queue', attempt.queue)),
            clock_timestamp(), actor);
    END IF;
    RETURN NULL;
END;
$$;

-- Resumes at the step params ->> 'step' (refused as invalid when the class has no such step,
-- or it is a gravestone); the attempt the run was on is superseded.
CREATE OR REPLACE FUNCTION pgbus.workflow_command_resume_at(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text, params jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    step jsonb := pgbus.workflow_step_definition(run.workflow_class, params ->> 'step');
BEGIN
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
    RETURN NULL;
END;
$$;
