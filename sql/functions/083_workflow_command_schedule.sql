-- The outside verbs run_now, reschedule ({"at": ...}) and skip (dispatched by
-- pgbus.workflow_command under the run's row lock). NULL: done; a refusal answers itself.

-- Moves the scheduled step to params ->> 'at', or to now when params is NULL (run_now).
CREATE OR REPLACE FUNCTION pgbus.workflow_command_reschedule(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text, params jsonb
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz;
BEGIN
    BEGIN
        at := CASE WHEN params IS NULL THEN clock_timestamp() ELSE (params ->> 'at')::timestamptz END;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
        at := NULL;
    END;
    IF at IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'status', run.status,
                                  'message', 'reschedule needs a time: {"at": "<ISO 8601 timestamp>"}');
    END IF;
    UPDATE pgbus.workflow_steps SET scheduled_at = at WHERE step_id = attempt.step_id;
    PERFORM pgmq.set_vt(attempt.queue, attempt.msg_id, greatest(at, clock_timestamp()));
    PERFORM pgbus.workflow_event(run.workflow_id, CASE WHEN params IS NULL THEN 'run_now' ELSE 'rescheduled' END,
                                 attempt.step_id, actor, reason,
                                 jsonb_build_object('step', attempt.step_name, 'scheduled_at', at));
    RETURN NULL;
END;
$$;

-- Skips the step a waiting run waits on; the run goes on with the next. `new_status` is what
-- the transition table says skip leads to.
CREATE OR REPLACE FUNCTION pgbus.workflow_command_skip(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text, new_status text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgbus.workflow_conclude(run, attempt, 'skip', new_status, NULL, NULL, NULL,
                                    coalesce(actor, 'operator'), reason);
    RETURN NULL;
END;
$$;
