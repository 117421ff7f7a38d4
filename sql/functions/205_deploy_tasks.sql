-- Deploy tasks: one-time work owed by a release, run once the fleet has rolled over. The
-- rollover rule, the declarations, the claim per (task_key, arm) and the enqueue are one
-- transaction here; the scheduler calls pgbus.deploy_tasks_fire every tick with its own app
-- revision and declarations.

-- The live pgbus processes (a heartbeat within live_within), one row per app revision and kind.
CREATE OR REPLACE FUNCTION pgbus.fleet_revisions(live_within interval DEFAULT interval '5 minutes')
RETURNS TABLE (app_revision text, kind text, processes integer, first_started_at timestamptz,
               last_started_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT p.app_revision, p.kind, count(*)::integer, min(p.started_at), max(p.started_at)
    FROM pgbus.processes p
    WHERE p.last_heartbeat_at >= now() - live_within
    GROUP BY p.app_revision, p.kind
    ORDER BY max(p.started_at) DESC, p.kind
$$;

-- Has the fleet rolled over to `revision`? True when every live pgbus process reports it and a
-- worker on it is alive. A process that reports no revision counts as another revision, unless
-- `revision` is NULL too (an app that stamps no revision at all rolls over as soon as it runs a
-- worker). Returns {"revision", "rolled_over", "live", "on_revision", "workers_on_revision",
-- "others": [{"app_revision", "processes"}]}.
CREATE OR REPLACE FUNCTION pgbus.fleet_rollover(revision text, live_within interval DEFAULT interval '5 minutes')
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH live AS (
        SELECT * FROM pgbus.fleet_revisions(live_within)
    ), counts AS (
        SELECT coalesce(sum(l.processes), 0)::integer AS live,
               coalesce(sum(l.processes) FILTER (WHERE l.app_revision IS NOT DISTINCT FROM revision), 0)::integer AS on_revision,
               coalesce(sum(l.processes) FILTER (WHERE l.app_revision IS NOT DISTINCT FROM revision
                                                 AND l.kind = 'worker'), 0)::integer AS workers
        FROM live l
    )
    SELECT jsonb_build_object(
        'revision', revision,
        'rolled_over', c.workers > 0 AND c.on_revision = c.live,
        'live', c.live,
        'on_revision', c.on_revision,
        'workers_on_revision', c.workers,
        'others', coalesce((
            SELECT jsonb_agg(jsonb_build_object('app_revision', o.app_revision, 'processes', o.n)
                             ORDER BY o.app_revision NULLS FIRST)
            FROM (SELECT l.app_revision, sum(l.processes)::integer AS n FROM live l
                  WHERE l.app_revision IS DISTINCT FROM revision GROUP BY l.app_revision) o
        ), '[]'::jsonb))
    FROM counts c
$$;

-- The declared deploy tasks (a JSON array of objects with key, target, class_name, arguments,
-- queue_name, priority, description, version, every_deploy, enabled) as rows.
CREATE OR REPLACE FUNCTION pgbus.deploy_task_declarations(declared jsonb)
RETURNS TABLE (key text, target text, class_name text, arguments jsonb, queue_name text,
               priority integer, description text, version text, every_deploy boolean,
               enabled boolean)
LANGUAGE sql IMMUTABLE AS $$
    SELECT d.key, coalesce(d.target, 'job'), d.class_name, coalesce(d.arguments, '{}'), d.queue_name,
           d.priority, d.description, nullif(btrim(d.version), ''), coalesce(d.every_deploy, false),
           coalesce(d.enabled, true)
    FROM jsonb_to_recordset(declared) AS d(key text, target text, class_name text, arguments jsonb,
         queue_name text, priority integer, description text, version text, every_deploy boolean,
         enabled boolean)
$$;

-- Writes the declarations of `revision` (all or nothing) and removes the static tasks it no
-- longer declares (their run history stays). Called by deploy_tasks_fire once the fleet runs
-- that revision, so during a rolling deploy the old code's declarations never overwrite the
-- new ones. Returns the number of tasks declared.
CREATE OR REPLACE FUNCTION pgbus.deploy_tasks_declare(declared jsonb, revision text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    bad text;
    n integer;
BEGIN
    IF jsonb_typeof(declared) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'pgbus: deploy tasks are declared as a JSON array' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT d.key INTO bad FROM pgbus.deploy_task_declarations(declared) d
    GROUP BY d.key HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgbus: deploy task % is declared twice', bad USING ERRCODE = 'unique_violation';
    END IF;
    SELECT coalesce(d.key, '(no key)') INTO bad FROM pgbus.deploy_task_declarations(declared) d
    WHERE d.key IS NULL OR d.class_name IS NULL OR (d.version IS NOT NULL) = d.every_deploy
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pgbus: deploy task % needs a key, a class_name and either a version or every_deploy', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgbus.deploy_tasks AS t (key, target, class_name, arguments, queue_name, priority,
                                         description, version, every_deploy, enabled,
                                         declared_enabled, declared_revision)
    SELECT d.key, d.target, d.class_name, d.arguments, d.queue_name, d.priority, d.description,
           d.version, d.every_deploy, d.enabled, d.enabled, revision
    FROM pgbus.deploy_task_declarations(declared) d ORDER BY d.key
    ON CONFLICT (key) DO UPDATE SET
        target = excluded.target,
        class_name = excluded.class_name,
        arguments = excluded.arguments,
        queue_name = excluded.queue_name,
        priority = excluded.priority,
        description = excluded.description,
        version = excluded.version,
        every_deploy = excluded.every_deploy,
        enabled = CASE WHEN t.declared_enabled IS DISTINCT FROM excluded.declared_enabled
                       THEN excluded.declared_enabled ELSE t.enabled END,
        declared_enabled = excluded.declared_enabled,
        declared_revision = excluded.declared_revision,
        updated_at = CASE WHEN (t.target, t.class_name, t.arguments, t.queue_name, t.priority,
                                t.description, t.version, t.every_deploy, t.declared_enabled)
                               IS DISTINCT FROM (excluded.target, excluded.class_name, excluded.arguments,
                                excluded.queue_name, excluded.priority, excluded.description,
                                excluded.version, excluded.every_deploy, excluded.declared_enabled)
                          THEN now() ELSE t.updated_at END;
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM pgbus.deploy_tasks t
    WHERE NOT EXISTS (SELECT 1 FROM pgbus.deploy_task_declarations(declared) d WHERE d.key = t.key);
    RETURN n;
END;
$$;

-- What a task runs once for under `revision`: 'version:<v>', or 'revision:<r>' for an
-- every_deploy task (NULL when there is no revision to key it by).
CREATE OR REPLACE FUNCTION pgbus.deploy_task_arm(version text, every_deploy boolean, revision text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN every_deploy THEN 'revision:' || revision ELSE 'version:' || version END
$$;

-- The scheduler's tick for deploy tasks, in one transaction: the rollover check for the
-- caller's `revision`, then (only when the fleet has rolled over) the caller's declarations
-- (when given), then for each enabled task whose arm is unclaimed: the claim (a row of
-- deploy_task_runs under its unique index) and the enqueue. Two schedulers: the second waits
-- on the first's claim and then claims nothing. Returns {"rolled_over", "rollover": {...},
-- "fired": [{"task_key", "arm", "version", "app_revision", "msg_id", "workflow_id", ...}]}.
CREATE OR REPLACE FUNCTION pgbus.deploy_tasks_fire(
    revision text, declared jsonb DEFAULT NULL, live_within interval DEFAULT interval '5 minutes'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    rollover jsonb := pgbus.fleet_rollover(revision, live_within);
    t pgbus.deploy_tasks;
    task_arm text;
    new_run_id bigint;
    sent record;
    fired jsonb := '[]';
BEGIN
    IF NOT (rollover ->> 'rolled_over')::boolean THEN
        RETURN jsonb_build_object('rolled_over', false, 'rollover', rollover, 'fired', fired);
    END IF;
    IF declared IS NOT NULL THEN
        PERFORM pgbus.deploy_tasks_declare(declared, revision);
    END IF;
    FOR t IN SELECT * FROM pgbus.deploy_tasks d WHERE d.enabled ORDER BY d.key LOOP
        task_arm := pgbus.deploy_task_arm(t.version, t.every_deploy, revision);
        CONTINUE WHEN task_arm IS NULL;
        INSERT INTO pgbus.deploy_task_runs (task_key, arm, version, app_revision, queue_name)
        VALUES (t.key, task_arm, t.version, revision, t.queue_name)
        ON CONFLICT (task_key, arm) WHERE NOT manual DO NOTHING
        RETURNING id INTO new_run_id;
        CONTINUE WHEN new_run_id IS NULL;
        SELECT * INTO sent FROM pgbus.scheduler_enqueue(t.target, t.class_name, t.queue_name,
                                                        t.arguments, 'deploy:' || t.key || '@' || task_arm);
        UPDATE pgbus.deploy_task_runs r SET msg_id = sent.msg_id, workflow_id = sent.workflow_id
        WHERE r.id = new_run_id;
        fired := fired || jsonb_build_object(
            'task_key', t.key, 'arm', task_arm, 'version', t.version, 'every_deploy', t.every_deploy,
            'app_revision', revision, 'target', t.target, 'class_name', t.class_name,
            'queue_name', t.queue_name, 'msg_id', sent.msg_id, 'workflow_id', sent.workflow_id,
            'run_id', new_run_id, 'manual', false);
    END LOOP;
    RETURN jsonb_build_object('rolled_over', true, 'rollover', rollover, 'fired', fired);
END;
$$;

-- "Run now": enqueues the task at once as a manual run (enabled or not, rolled over or not);
-- it claims no arm.
CREATE OR REPLACE FUNCTION pgbus.deploy_task_run_now(task_key text, revision text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    t pgbus.deploy_tasks;
    run_id bigint;
    sent record;
BEGIN
    SELECT * INTO t FROM pgbus.deploy_tasks d WHERE d.key = task_key;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found', 'task_key', task_key);
    END IF;
    SELECT * INTO sent FROM pgbus.scheduler_enqueue(t.target, t.class_name, t.queue_name, t.arguments, NULL);
    INSERT INTO pgbus.deploy_task_runs (task_key, arm, version, app_revision, manual, queue_name,
                                        msg_id, workflow_id)
    VALUES (t.key, 'manual', t.version, revision, true, t.queue_name, sent.msg_id, sent.workflow_id)
    RETURNING id INTO run_id;
    RETURN jsonb_build_object('ok', true, 'task_key', t.key, 'arm', 'manual', 'manual', true,
                              'version', t.version, 'app_revision', revision, 'target', t.target,
                              'class_name', t.class_name, 'queue_name', t.queue_name,
                              'msg_id', sent.msg_id, 'workflow_id', sent.workflow_id, 'run_id', run_id);
END;
$$;

-- Enable or Disable a deploy task. A disabled task's arm waits: enabled again while the fleet
-- still runs that revision, it fires then.
CREATE OR REPLACE FUNCTION pgbus.deploy_task_set_enabled(task_key text, enabled boolean)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    was boolean;
BEGIN
    IF enabled IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'task_key', task_key);
    END IF;
    SELECT d.enabled INTO was FROM pgbus.deploy_tasks d WHERE d.key = task_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'code', 'not_found', 'task_key', task_key);
    END IF;
    UPDATE pgbus.deploy_tasks d SET enabled = deploy_task_set_enabled.enabled, updated_at = now()
    WHERE d.key = task_key;
    RETURN jsonb_build_object('ok', true, 'task_key', task_key, 'enabled', enabled,
                              'changed', was IS DISTINCT FROM enabled);
END;
$$;

-- A task's runs, newest first.
CREATE OR REPLACE FUNCTION pgbus.deploy_task_runs_of(task_key text, max_rows integer DEFAULT 25)
RETURNS SETOF pgbus.deploy_task_runs
LANGUAGE sql STABLE AS $$
    SELECT * FROM pgbus.deploy_task_runs r
    WHERE r.task_key = deploy_task_runs_of.task_key
    ORDER BY r.enqueued_at DESC, r.id DESC
    LIMIT greatest(coalesce(max_rows, 25), 0)
$$;

-- Deletes runs older than the retention (default 90 days), except each task's newest claiming
-- run: that claim keeps a version task from firing its current version again.
CREATE OR REPLACE FUNCTION pgbus.cleanup_deploy_task_runs(retention interval DEFAULT interval '90 days')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgbus.deploy_task_runs r
        WHERE r.enqueued_at < now() - retention
          AND r.id <> coalesce((SELECT max(n.id) FROM pgbus.deploy_task_runs n
                                WHERE n.task_key = r.task_key AND NOT n.manual), -1)
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

-- The fleet as the Deploy tasks page and MCP show it: the newest revision (of the most
-- recently started live process), whether the fleet has rolled over to it, the live processes
-- per revision and each process.
CREATE OR REPLACE FUNCTION pgbus.fleet_status(live_within interval DEFAULT interval '5 minutes')
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH newest AS (
        SELECT p.app_revision FROM pgbus.processes p
        WHERE p.last_heartbeat_at >= now() - live_within
        ORDER BY p.started_at DESC, p.id DESC LIMIT 1
    )
    SELECT jsonb_build_object(
        'revision', (SELECT app_revision FROM newest),
        'rollover', CASE WHEN EXISTS (SELECT 1 FROM newest)
                         THEN pgbus.fleet_rollover((SELECT app_revision FROM newest), live_within) END,
        'rolled_over', coalesce((pgbus.fleet_rollover((SELECT app_revision FROM newest), live_within)
                                 ->> 'rolled_over')::boolean AND EXISTS (SELECT 1 FROM newest), false),
        'revisions', coalesce((
            SELECT jsonb_agg(jsonb_build_object('app_revision', r.app_revision, 'processes', r.n,
                                                'kinds', r.kinds, 'last_started_at', r.last_started)
                             ORDER BY r.last_started DESC)
            FROM (SELECT f.app_revision, sum(f.processes)::integer AS n,
                         jsonb_object_agg(f.kind, f.processes) AS kinds, max(f.last_started_at) AS last_started
                  FROM pgbus.fleet_revisions(live_within) f GROUP BY f.app_revision) r
        ), '[]'::jsonb),
        'processes', coalesce((
            SELECT jsonb_agg(jsonb_build_object('id', p.id, 'kind', p.kind, 'hostname', p.hostname,
                                                'pid', p.pid, 'app_revision', p.app_revision,
                                                'started_at', p.started_at,
                                                'last_heartbeat_at', p.last_heartbeat_at)
                             ORDER BY p.app_revision NULLS FIRST, p.kind, p.id)
            FROM pgbus.processes p WHERE p.last_heartbeat_at >= now() - live_within
        ), '[]'::jsonb))
$$;

-- Each deploy task with its state for the fleet's newest revision: disabled; enqueued (its arm
-- for that revision was claimed); waiting_for_rollover; due (the fleet rolled over, the
-- scheduler fires it at its next tick); no_revision (every_deploy, but no process reports a
-- revision). With its last run.
CREATE OR REPLACE FUNCTION pgbus.deploy_task_list(live_within interval DEFAULT interval '5 minutes')
RETURNS TABLE (key text, target text, class_name text, arguments jsonb, queue_name text,
               priority integer, description text, version text, every_deploy boolean,
               enabled boolean, arm text, state text, runs integer, last_run_at timestamptz,
               last_run_revision text, last_run_manual boolean, created_at timestamptz,
               updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH fleet AS (SELECT pgbus.fleet_status(live_within) AS s)
    SELECT d.key, d.target, d.class_name, d.arguments, d.queue_name, d.priority, d.description,
           d.version, d.every_deploy, d.enabled, a.arm,
           CASE WHEN NOT d.enabled THEN 'disabled'
                WHEN a.arm IS NULL THEN 'no_revision'
                WHEN EXISTS (SELECT 1 FROM pgbus.deploy_task_runs r
                             WHERE r.task_key = d.key AND r.arm = a.arm AND NOT r.manual) THEN 'enqueued'
                WHEN (f.s ->> 'rolled_over')::boolean THEN 'due'
                ELSE 'waiting_for_rollover' END,
           (SELECT count(*)::integer FROM pgbus.deploy_task_runs r WHERE r.task_key = d.key),
           l.enqueued_at, l.app_revision, l.manual, d.created_at, d.updated_at
    FROM pgbus.deploy_tasks d
    CROSS JOIN fleet f
    CROSS JOIN LATERAL (SELECT pgbus.deploy_task_arm(d.version, d.every_deploy, f.s ->> 'revision') AS arm) a
    LEFT JOIN LATERAL (SELECT r.enqueued_at, r.app_revision, r.manual FROM pgbus.deploy_task_runs r
                       WHERE r.task_key = d.key ORDER BY r.enqueued_at DESC, r.id DESC LIMIT 1) l ON true
    ORDER BY d.key
$$;

-- The Deploy tasks page and the MCP tool pgbus_deploy_tasks as one JSON answer: the fleet
-- (fleet_status) and every task with its state, last run and its latest `recent` runs.
CREATE OR REPLACE FUNCTION pgbus.deploy_tasks_overview(
    live_within interval DEFAULT interval '5 minutes', recent integer DEFAULT 5
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'fleet', pgbus.fleet_status(live_within),
        'deploy_tasks', coalesce((
            SELECT jsonb_agg(to_jsonb(l) || jsonb_build_object('recent_runs', coalesce((
                       SELECT jsonb_agg(to_jsonb(r) ORDER BY r.enqueued_at DESC, r.id DESC)
                       FROM pgbus.deploy_task_runs_of(l.key, recent) r), '[]'::jsonb))
                   ORDER BY l.key)
            FROM pgbus.deploy_task_list(live_within) l
        ), '[]'::jsonb))
$$;
