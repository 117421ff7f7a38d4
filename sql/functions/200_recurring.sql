-- Recurring tasks. The scheduler (Python) parses the declarations and computes the ticks of
-- each schedule in its time zone; everything else is here: the declarations' sync, the claim of
-- a tick per (task_key, run_at) in the same transaction as its enqueue, Run now, Enable and
-- Disable, the history and its cleanup.

-- Sends a scheduled task's job (pgbus.enqueue) or starts its workflow (pgbus.workflow_start).
-- Shared by recurring and deploy tasks; runs inside the caller's transaction.
CREATE OR REPLACE FUNCTION pgbus.scheduler_enqueue(
    target text, class_name text, queue_name text, arguments jsonb, idempotency_key text
) RETURNS TABLE (msg_id bigint, workflow_id uuid)
LANGUAGE plpgsql AS $$
BEGIN
    IF target = 'workflow' THEN
        RETURN QUERY
            SELECT NULL::bigint, s.workflow_id
            FROM pgbus.workflow_start(class_name, NULL, NULL, coalesce(arguments, '{}'),
                                      idempotency_key, 'scheduler') s;
    ELSE
        RETURN QUERY
            SELECT e, NULL::uuid FROM pgbus.enqueue(queue_name, class_name, ARRAY[arguments]) e;
    END IF;
END;
$$;

-- The declared recurring tasks (a JSON array of objects with key, target, class_name,
-- arguments, schedule, human_schedule, time_zone, queue_name, priority, description, enabled)
-- as rows, with the defaults filled in.
CREATE OR REPLACE FUNCTION pgbus.recurring_declarations(declared jsonb)
RETURNS TABLE (key text, target text, class_name text, arguments jsonb, schedule text,
               human_schedule text, time_zone text, queue_name text, priority integer,
               description text, enabled boolean)
LANGUAGE sql IMMUTABLE AS $$
    SELECT d.key, coalesce(d.target, 'job'), d.class_name, coalesce(d.arguments, '{}'),
           d.schedule, coalesce(d.human_schedule, d.schedule), coalesce(d.time_zone, 'UTC'),
           d.queue_name, d.priority, d.description, coalesce(d.enabled, true)
    FROM jsonb_to_recordset(declared) AS d(key text, target text, class_name text, arguments jsonb,
         schedule text, human_schedule text, time_zone text, queue_name text, priority integer,
         description text, enabled boolean)
$$;

-- Writes the declared recurring tasks and removes the static tasks no longer declared, all or
-- nothing: a bad entry (a CHECK that fails) leaves every task as it was. A new task, a changed
-- schedule or time zone starts its schedule now: no tick before it is caught up. `enabled`
-- follows the declaration only when the declaration changed it, so a dashboard toggle survives
-- restarts. Returns {"added": n, "changed": n, "removed": n}.
CREATE OR REPLACE FUNCTION pgbus.recurring_sync(declared jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    added integer;
    changed integer;
    removed integer;
    bad text;
BEGIN
    IF jsonb_typeof(declared) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'pgbus: recurring_sync takes a JSON array of task declarations'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT d.key INTO bad FROM pgbus.recurring_declarations(declared) d
    GROUP BY d.key HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgbus: recurring task % is declared twice', bad USING ERRCODE = 'unique_violation';
    END IF;
    SELECT coalesce(d.key, '(no key)') INTO bad FROM pgbus.recurring_declarations(declared) d
    WHERE d.key IS NULL OR d.class_name IS NULL OR d.schedule IS NULL
       OR NOT EXISTS (SELECT 1 FROM pg_timezone_names z WHERE z.name = d.time_zone)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgbus: recurring task % needs a key, a class_name, a schedule and a known time zone', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT count(*) FILTER (WHERE t.key IS NULL),
           count(*) FILTER (WHERE t.key IS NOT NULL AND (t.target, t.class_name, t.arguments, t.schedule,
                  t.human_schedule, t.time_zone, t.queue_name, t.priority, t.description,
                  t.declared_enabled, t.static)
                  IS DISTINCT FROM (d.target, d.class_name, d.arguments, d.schedule, d.human_schedule,
                  d.time_zone, d.queue_name, d.priority, d.description, d.enabled, true))
    INTO added, changed
    FROM pgbus.recurring_declarations(declared) d LEFT JOIN pgbus.recurring_tasks t ON t.key = d.key;

    INSERT INTO pgbus.recurring_tasks AS t (key, target, class_name, arguments, schedule, human_schedule,
                                            time_zone, queue_name, priority, description, enabled,
                                            declared_enabled, static, schedule_from)
    SELECT d.key, d.target, d.class_name, d.arguments, d.schedule, d.human_schedule, d.time_zone,
           d.queue_name, d.priority, d.description, d.enabled, d.enabled, true, now()
    FROM pgbus.recurring_declarations(declared) d ORDER BY d.key
    ON CONFLICT (key) DO UPDATE SET
        target = excluded.target,
        class_name = excluded.class_name,
        arguments = excluded.arguments,
        schedule = excluded.schedule,
        human_schedule = excluded.human_schedule,
        time_zone = excluded.time_zone,
        queue_name = excluded.queue_name,
        priority = excluded.priority,
        description = excluded.description,
        static = true,
        enabled = CASE WHEN t.declared_enabled IS DISTINCT FROM excluded.declared_enabled
                       THEN excluded.declared_enabled ELSE t.enabled END,
        declared_enabled = excluded.declared_enabled,
        schedule_from = CASE
            WHEN (t.schedule, t.time_zone) IS DISTINCT FROM (excluded.schedule, excluded.time_zone)
              OR (NOT t.enabled AND NOT t.declared_enabled AND excluded.declared_enabled)
            THEN now() ELSE t.schedule_from END,
        next_run_at = CASE WHEN (t.schedule, t.time_zone) IS DISTINCT FROM (excluded.schedule, excluded.time_zone)
                           THEN NULL ELSE t.next_run_at END,
        updated_at = CASE WHEN (t.target, t.class_name, t.arguments, t.schedule, t.human_schedule,
                                t.time_zone, t.queue_name, t.priority, t.description,
                                t.declared_enabled, t.static)
                               IS DISTINCT FROM (excluded.target, excluded.class_name, excluded.arguments,
                                excluded.schedule, excluded.human_schedule, excluded.time_zone,
                                excluded.queue_name, excluded.priority, excluded.description,
                                excluded.declared_enabled, true)
                          THEN now() ELSE t.updated_at END;

    WITH gone AS (
        DELETE FROM pgbus.recurring_tasks t
        WHERE t.static
          AND NOT EXISTS (SELECT 1 FROM pgbus.recurring_declarations(declared) d WHERE d.key = t.key)
        RETURNING 1
    )
    SELECT count(*) INTO removed FROM gone;
    RETURN jsonb_build_object('added', added, 'changed', changed, 'removed', removed);
END;
$$;

-- Claims the tick (task_key, run_at) and enqueues the task's job in the same transaction. Two
-- schedulers calling this for one tick: the second waits on the first's claim and, once it
-- commits, answers already_fired; if the first rolled back, the second fires. Refusals are
-- answers: not_found, disabled, before_schedule (a tick before the task's schedule began),
-- in_future, already_fired.
CREATE OR REPLACE FUNCTION pgbus.recurring_fire(task_key text, run_at timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    t pgbus.recurring_tasks;
    claimed integer;
    sent record;
BEGIN
    SELECT * INTO t FROM pgbus.recurring_tasks r WHERE r.key = task_key;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found', 'task_key', task_key);
    ELSIF NOT t.enabled THEN
        RETURN jsonb_build_object('ok', false, 'code', 'disabled', 'task_key', task_key);
    ELSIF run_at IS NULL OR run_at < t.schedule_from THEN
        RETURN jsonb_build_object('ok', false, 'code', 'before_schedule', 'task_key', task_key,
                                  'schedule_from', t.schedule_from);
    ELSIF run_at > clock_timestamp() THEN
        RETURN jsonb_build_object('ok', false, 'code', 'in_future', 'task_key', task_key);
    END IF;

    INSERT INTO pgbus.recurring_executions AS e (task_key, run_at, queue_name)
    VALUES (t.key, recurring_fire.run_at, t.queue_name)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS claimed = ROW_COUNT;
    IF claimed = 0 THEN
        RETURN jsonb_build_object('ok', false, 'code', 'already_fired', 'task_key', task_key,
                                  'run_at', run_at);
    END IF;

    SELECT * INTO sent FROM pgbus.scheduler_enqueue(
        t.target, t.class_name, t.queue_name, t.arguments,
        'recurring:' || t.key || '@' || to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
    UPDATE pgbus.recurring_executions e SET msg_id = sent.msg_id, workflow_id = sent.workflow_id
    WHERE e.task_key = t.key AND e.run_at = recurring_fire.run_at;
    UPDATE pgbus.recurring_tasks r SET last_run_at = greatest(r.last_run_at, recurring_fire.run_at)
    WHERE r.key = t.key;
    RETURN jsonb_build_object('ok', true, 'task_key', t.key, 'run_at', run_at, 'target', t.target,
                              'class_name', t.class_name, 'queue_name', t.queue_name,
                              'msg_id', sent.msg_id, 'workflow_id', sent.workflow_id);
END;
$$;

-- The ticks of one task already claimed in [since, until]: a scheduler that starts (or one
-- that lost a race) skips them without trying.
CREATE OR REPLACE FUNCTION pgbus.recurring_claimed(task_key text, since timestamptz, until timestamptz)
RETURNS SETOF timestamptz
LANGUAGE sql STABLE AS $$
    SELECT e.run_at FROM pgbus.recurring_executions e
    WHERE e.task_key = recurring_claimed.task_key AND e.run_at >= since AND e.run_at <= until
      AND NOT e.manual
    ORDER BY e.run_at
$$;

-- The scheduler notes each task's next tick (computed from the cron line in Python) for the
-- dashboard and MCP: {"key": "2026-12-01T12:00:00Z", ...}. Returns the rows changed.
CREATE OR REPLACE FUNCTION pgbus.recurring_note_next_runs(next_runs jsonb)
RETURNS integer
LANGUAGE sql AS $$
    WITH changed AS (
        UPDATE pgbus.recurring_tasks t SET next_run_at = (n.value #>> '{}')::timestamptz
        FROM jsonb_each(next_runs) n
        WHERE t.key = n.key AND t.next_run_at IS DISTINCT FROM (n.value #>> '{}')::timestamptz
        RETURNING 1
    )
    SELECT count(*)::integer FROM changed
$$;

-- "Run now": enqueues the task at once as a manual execution (whatever its schedule, enabled
-- or not). It claims no tick.
CREATE OR REPLACE FUNCTION pgbus.recurring_run_now(task_key text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    t pgbus.recurring_tasks;
    at timestamptz := clock_timestamp();
    sent record;
BEGIN
    SELECT * INTO t FROM pgbus.recurring_tasks r WHERE r.key = task_key;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found', 'task_key', task_key);
    END IF;
    SELECT * INTO sent FROM pgbus.scheduler_enqueue(t.target, t.class_name, t.queue_name, t.arguments, NULL);
    INSERT INTO pgbus.recurring_executions (task_key, run_at, manual, queue_name, msg_id, workflow_id)
    VALUES (t.key, at, true, t.queue_name, sent.msg_id, sent.workflow_id);
    UPDATE pgbus.recurring_tasks r SET last_run_at = greatest(r.last_run_at, at) WHERE r.key = t.key;
    RETURN jsonb_build_object('ok', true, 'task_key', t.key, 'run_at', at, 'manual', true,
                              'class_name', t.class_name, 'queue_name', t.queue_name,
                              'msg_id', sent.msg_id, 'workflow_id', sent.workflow_id);
END;
$$;

-- Enable or Disable a task. Enabling starts its schedule again now: the ticks it missed while
-- disabled are not caught up.
CREATE OR REPLACE FUNCTION pgbus.recurring_set_enabled(task_key text, enabled boolean)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    was boolean;
BEGIN
    IF enabled IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'task_key', task_key);
    END IF;
    SELECT r.enabled INTO was FROM pgbus.recurring_tasks r WHERE r.key = task_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found', 'task_key', task_key);
    END IF;
    UPDATE pgbus.recurring_tasks r
    SET enabled = recurring_set_enabled.enabled,
        schedule_from = CASE WHEN recurring_set_enabled.enabled AND NOT was THEN now() ELSE r.schedule_from END,
        updated_at = now()
    WHERE r.key = task_key;
    RETURN jsonb_build_object('ok', true, 'task_key', task_key, 'enabled', enabled,
                              'changed', was IS DISTINCT FROM enabled);
END;
$$;

-- The latest executions of a task, newest first (the dashboard shows 25).
CREATE OR REPLACE FUNCTION pgbus.recurring_executions_of(task_key text, max_rows integer DEFAULT 25)
RETURNS SETOF pgbus.recurring_executions
LANGUAGE sql STABLE AS $$
    SELECT * FROM pgbus.recurring_executions e
    WHERE e.task_key = recurring_executions_of.task_key
    ORDER BY e.run_at DESC
    LIMIT greatest(coalesce(max_rows, 25), 0)
$$;

-- Deletes executions older than the retention (default 7 days). Keep it longer than the
-- scheduler's catch-up window, or a restarted scheduler could fire a deleted tick again.
CREATE OR REPLACE FUNCTION pgbus.cleanup_recurring_executions(retention interval DEFAULT interval '7 days')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgbus.recurring_executions WHERE run_at < now() - retention RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;
