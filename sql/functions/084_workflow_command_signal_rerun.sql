-- The outside verbs signal ({"name", "payload", "idempotency_key"}) and rerun (dispatched by
-- pgbus.workflow_command under the run's row lock). Each answers for itself.

-- Stores the signal (or, its key seen before on this run, nothing: duplicate_delivery) and
-- wakes the step waiting for it. `new_status` is the status when nothing wakes.
CREATE OR REPLACE FUNCTION pgbus.workflow_command_signal(
    run pgbus.workflows, attempt pgbus.workflow_steps, actor text, reason text, params jsonb,
    new_status text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    signal pgbus.workflow_signals;
    woke boolean := false;
    signal_name text := btrim(params ->> 'name');
    signal_key text := pgbus.idempotency_key(params ->> 'idempotency_key');  -- a blank key is no key
BEGIN
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
END;
$$;

-- A new run of the same class, subject and arguments, linked both ways (refused as
-- already_running when the subject has an ongoing run).
CREATE OR REPLACE FUNCTION pgbus.workflow_command_rerun(run pgbus.workflows, actor text, reason text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    new_run uuid;
BEGIN
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
END;
$$;
