-- The operator actions of the Recurring and Deploy tasks pages (and MCP write tools): Run now
-- and Enable/Disable. Each answers {ok, code, message, ...} through pgbus.answer and records
-- the call in pgbus.operator_actions with its actor (pgbus.operator_record).

CREATE OR REPLACE FUNCTION pgbus.recurring_task_toggle(task_key text, enabled boolean, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := pgbus.recurring_set_enabled(task_key, enabled);
    outcome jsonb;
BEGIN
    IF r ->> 'code' = 'not_found' THEN
        outcome := pgbus.answer(false, 'not_found', 'Not done: there is no recurring task ' || coalesce(task_key, '(none)'));
    ELSIF NOT (r ->> 'ok')::boolean THEN
        outcome := pgbus.answer(false, r ->> 'code', 'Not done: say enable or disable');
    ELSIF NOT (r ->> 'changed')::boolean THEN
        outcome := pgbus.answer(true, 'unchanged', 'Recurring task ' || task_key || ' was already '
                                || CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END, r - 'ok');
    ELSE
        outcome := pgbus.answer(true, CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END,
                                'Recurring task ' || task_key || CASE WHEN enabled
                                    THEN ' enabled: it fires from its next tick on'
                                    ELSE ' disabled: it fires no more ticks until enabled' END,
                                r - 'ok');
    END IF;
    RETURN pgbus.operator_record(actor, CASE WHEN enabled THEN 'recurring_task_enable' ELSE 'recurring_task_disable' END,
                                 jsonb_build_object('task_key', task_key), outcome);
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.recurring_task_run_now(task_key text, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := pgbus.recurring_run_now(task_key);
    outcome jsonb;
BEGIN
    IF NOT (r ->> 'ok')::boolean THEN
        outcome := pgbus.answer(false, 'not_found', 'Not done: there is no recurring task ' || coalesce(task_key, '(none)'));
    ELSE
        outcome := pgbus.answer(true, 'enqueued', 'Recurring task ' || task_key || ' enqueued now'
                                || CASE WHEN r ->> 'msg_id' IS NOT NULL
                                        THEN ' (message ' || (r ->> 'msg_id') || ' in ' || (r ->> 'queue_name') || ')'
                                        ELSE ' (workflow run ' || (r ->> 'workflow_id') || ')' END,
                                r - 'ok');
    END IF;
    RETURN pgbus.operator_record(actor, 'recurring_task_run_now', jsonb_build_object('task_key', task_key), outcome);
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.deploy_task_toggle(task_key text, enabled boolean, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := pgbus.deploy_task_set_enabled(task_key, enabled);
    outcome jsonb;
BEGIN
    IF r ->> 'code' = 'not_found' THEN
        outcome := pgbus.answer(false, 'not_found', 'Not done: there is no deploy task ' || coalesce(task_key, '(none)'));
    ELSIF NOT (r ->> 'ok')::boolean THEN
        outcome := pgbus.answer(false, r ->> 'code', 'Not done: say enable or disable');
    ELSIF NOT (r ->> 'changed')::boolean THEN
        outcome := pgbus.answer(true, 'unchanged', 'Deploy task ' || task_key || ' was already '
                                || CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END, r - 'ok');
    ELSE
        outcome := pgbus.answer(true, CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END,
                                'Deploy task ' || task_key || CASE WHEN enabled
                                    THEN ' enabled: the scheduler enqueues it once the fleet has rolled over'
                                    ELSE ' disabled: the scheduler leaves it until it is enabled' END,
                                r - 'ok');
    END IF;
    RETURN pgbus.operator_record(actor, CASE WHEN enabled THEN 'deploy_task_enable' ELSE 'deploy_task_disable' END,
                                 jsonb_build_object('task_key', task_key), outcome);
END;
$$;

-- Run now from the dashboard: a manual run stamped with the fleet's newest revision.
CREATE OR REPLACE FUNCTION pgbus.deploy_task_run_now_by(
    task_key text, actor text, live_within interval DEFAULT interval '5 minutes'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := pgbus.deploy_task_run_now(task_key, pgbus.fleet_status(live_within) ->> 'revision');
    outcome jsonb;
BEGIN
    IF NOT (r ->> 'ok')::boolean THEN
        outcome := pgbus.answer(false, 'not_found', 'Not done: there is no deploy task ' || coalesce(task_key, '(none)'));
    ELSE
        outcome := pgbus.answer(true, 'enqueued', 'Deploy task ' || task_key || ' enqueued now'
                                || CASE WHEN r ->> 'msg_id' IS NOT NULL
                                        THEN ' (message ' || (r ->> 'msg_id') || ' in ' || (r ->> 'queue_name') || ')'
                                        ELSE ' (workflow run ' || (r ->> 'workflow_id') || ')' END,
                                r - 'ok');
    END IF;
    RETURN pgbus.operator_record(actor, 'deploy_task_run_now', jsonb_build_object('task_key', task_key), outcome);
END;
$$;
