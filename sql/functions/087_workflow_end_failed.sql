-- A step's end that raised in SQL (a constraint the step's output broke, an application
-- trigger, a bug): the end's transaction rolled back with everything the body wrote, and the
-- worker records the failure here, in a transaction of its own, as itself: the attempt failed
-- with `error` ({"class", "message", "sqlstate", ...}) and the run paused (cause error), the
-- message archived. Without this the message would come back and the attempt be taken for a
-- dead worker's ("StepStalled"). `begun_at` (the context's begun_at, when given) names the
-- begin that failed; an attempt that is no longer that begin, or no longer running, is left
-- alone. Answers {"ok": true, "status", "was"} or {"ok": false, "code": "stale" | "not_found",
-- "status"}.
CREATE OR REPLACE FUNCTION pgbus.workflow_end_failed(
    step_id bigint, error jsonb, begun_at timestamptz DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run pgbus.workflows;
    attempt pgbus.workflow_steps;
BEGIN
    IF jsonb_typeof(error) IS DISTINCT FROM 'object' OR coalesce(error ->> 'class', '') = '' THEN
        RAISE EXCEPTION 'pgbus: workflow_end_failed needs an error {"class", "message"}'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO run FROM pgbus.workflows w
    WHERE w.workflow_id = (SELECT s.workflow_id FROM pgbus.workflow_steps s
                           WHERE s.step_id = workflow_end_failed.step_id)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found');
    END IF;
    SELECT * INTO attempt FROM pgbus.workflow_steps s WHERE s.step_id = workflow_end_failed.step_id;
    IF attempt.status <> 'running' OR attempt.step_id IS DISTINCT FROM run.current_step_id
       OR (workflow_end_failed.begun_at IS NOT NULL AND attempt.started_at IS DISTINCT FROM workflow_end_failed.begun_at) THEN
        RETURN jsonb_build_object('ok', false, 'code', 'stale', 'status', run.status);
    END IF;
    IF attempt.msg_id IS NOT NULL THEN
        PERFORM pgbus.queue_archive(attempt.queue, attempt.msg_id);
    END IF;
    RETURN jsonb_build_object(
        'ok', true, 'was', run.status,
        'status', pgbus.workflow_conclude(run, attempt, 'pause', 'paused', NULL, error, NULL, NULL,
                                          'its end failed'));
END;
$$;

-- pgbus.workflow_time_out_step (a step that returned after its timeout: stalled, the stall
-- action applied), answered with the run's status before it, under the run's lock:
-- {"was", "status"} (status NULL when that begin was no longer current), so that the worker
-- emits the run's event only when the stall action moved it.
CREATE OR REPLACE FUNCTION pgbus.workflow_time_out_step_answer(
    step_id bigint, begun_at timestamptz, action text DEFAULT 'pause'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    was text;
BEGIN
    SELECT w.status INTO was FROM pgbus.workflows w
    WHERE w.workflow_id = (SELECT s.workflow_id FROM pgbus.workflow_steps s
                           WHERE s.step_id = workflow_time_out_step_answer.step_id)
    FOR UPDATE;
    RETURN jsonb_build_object('was', was, 'status', pgbus.workflow_time_out_step(
        workflow_time_out_step_answer.step_id, workflow_time_out_step_answer.begun_at, action));
END;
$$;
