-- Signalling by subject: the subject's ongoing run of a class, for callers that know the
-- subject but not the run (a payment provider's webhook knows the order).

-- Delivers signal `name` to the ongoing run of `workflow_class` for (subject_type, subject_id),
-- as pgbus.workflow_command(run, 'signal', ...) does, and answers the same with "workflow_id"
-- added; with no ongoing run (none, or it ended a moment ago) the refusal
-- {"ok": false, "code": "no_ongoing_run"} and nothing changes.
CREATE OR REPLACE FUNCTION pgbus.workflow_signal_subject(
    workflow_class text, subject_type text, subject_id text, name text,
    payload jsonb DEFAULT '{}', idempotency_key text DEFAULT NULL,
    actor text DEFAULT NULL, reason text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    run_id uuid;
    answer jsonb;
BEGIN
    IF subject_type IS NULL OR subject_id IS NULL THEN
        RAISE EXCEPTION 'pgbus: signalling by subject needs a subject type and id'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'signal a subject-less run by its id: pgbus.workflow_command';
    END IF;
    SELECT w.workflow_id INTO run_id FROM pgbus.workflows w
    WHERE w.workflow_class = workflow_signal_subject.workflow_class
      AND w.subject_type = workflow_signal_subject.subject_type
      AND w.subject_id = workflow_signal_subject.subject_id AND w.ended_at IS NULL;  -- ongoing
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'no_ongoing_run',
                                  'message', format('%s has no ongoing run for %s %s',
                                                    workflow_class, subject_type, subject_id));
    END IF;
    answer := pgbus.workflow_command(run_id, 'signal', actor, reason,
                                     jsonb_build_object('name', name, 'payload', coalesce(payload, '{}'),
                                                        'idempotency_key', idempotency_key));
    IF NOT (answer ->> 'ok')::boolean AND answer ->> 'status' IN ('finished', 'cancelled') THEN
        RETURN jsonb_build_object('ok', false, 'code', 'no_ongoing_run', 'status', answer ->> 'status',
                                  'workflow_id', run_id,
                                  'message', format('%s''s run %s has just ended', workflow_class, run_id));
    END IF;
    RETURN answer || jsonb_build_object('workflow_id', run_id);
END;
$$;
