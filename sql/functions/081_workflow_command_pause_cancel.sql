-- The outside verbs pause and cancel (pgbus.workflow_command dispatches to them after the
-- transition check, under the run's row lock). NULL: done.

CREATE OR REPLACE FUNCTION pgbus.workflow_command_pause(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
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
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.workflow_command_cancel(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgbus.workflow_supersede(attempt.step_id);
    UPDATE pgbus.workflow_steps SET status = 'cancelled', outcome = 'cancel', ended_at = clock_timestamp()
    WHERE step_id = attempt.step_id AND status = 'waiting';
    PERFORM pgbus.workflow_end(run.workflow_id, 'cancelled', actor, reason);
    RETURN NULL;
END;
$$;
