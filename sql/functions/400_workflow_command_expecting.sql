-- One outside verb on one run for a caller that read the run first (the MCP write tools): the
-- run's status is checked against the one the caller read (expected_status, optional) and the
-- verb against what the run allows now, both under the run's row lock, then the verb runs
-- through pgbus.workflow_command in the same transaction. Answers what workflow_command
-- answers, or a refusal that changes nothing:
--   {"ok": false, "code": "not_found"}
--   {"ok": false, "code": "status_changed", "status": <now>, "expected_status": ...}
--   {"ok": false, "code": "not_allowed", "status": <now>, "available_actions": [...]}
-- (An unknown verb is workflow_command's "invalid"; actor and reason limits raise as there.)
CREATE OR REPLACE FUNCTION pgbus.workflow_command_expecting(
    workflow_id uuid, verb text, actor text DEFAULT NULL, reason text DEFAULT NULL,
    params jsonb DEFAULT '{}', expected_status text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    now_status text;
    allowed text[];
BEGIN
    PERFORM pgbus.check_actor_reason(actor, reason);
    SELECT w.status INTO now_status FROM pgbus.workflows w
    WHERE w.workflow_id = workflow_command_expecting.workflow_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found');
    END IF;
    IF expected_status IS NOT NULL AND expected_status <> now_status THEN
        RETURN jsonb_build_object('ok', false, 'code', 'status_changed', 'status', now_status,
                                  'expected_status', expected_status);
    END IF;
    allowed := pgbus.workflow_available_actions(workflow_command_expecting.workflow_id);
    IF verb IS NOT NULL AND NOT (verb = ANY (allowed))
       AND verb IN (SELECT t.verb FROM pgbus.workflow_transitions t WHERE t.kind = 'outside') THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_allowed', 'status', now_status,
                                  'available_actions', to_jsonb(allowed));
    END IF;
    RETURN pgbus.workflow_command(workflow_command_expecting.workflow_id, verb, actor, reason, params);
END;
$$;
