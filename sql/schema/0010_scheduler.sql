-- The scheduler: recurring tasks (cron or `every:`), deploy tasks (once per version or per app
-- revision, after the fleet rolled over), and their histories. A claim is a row inserted under a
-- unique key in the same transaction as the enqueue, so two schedulers never both fire one tick
-- or one arm.

-- A new process kind: the scheduler.
ALTER TABLE pgbus.processes DROP CONSTRAINT IF EXISTS processes_kind_check;
ALTER TABLE pgbus.processes ADD CONSTRAINT processes_kind_check
    CHECK (kind IN ('supervisor', 'worker', 'dispatcher', 'scheduler'));
CREATE INDEX IF NOT EXISTS processes_revision_idx ON pgbus.processes (app_revision, kind);

-- One row per declared recurring task, written by the scheduler from its declarations.
CREATE TABLE pgbus.recurring_tasks (
    key               text PRIMARY KEY CHECK (key ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$'),
    -- 'job': pgbus.enqueue(queue_name, class_name, ARRAY[arguments]) with arguments
    -- {"args": [...], "kwargs": {...}}; 'workflow': pgbus.workflow_start(class_name,
    -- arguments => arguments) with the run's arguments.
    target            text NOT NULL DEFAULT 'job' CHECK (target IN ('job', 'workflow')),
    class_name        text NOT NULL CHECK (btrim(class_name) <> ''),
    arguments         jsonb NOT NULL DEFAULT '{}',
    schedule          text NOT NULL,          -- as declared: a cron line or "every 5m"
    human_schedule    text NOT NULL,          -- the schedule in words, for people
    time_zone         text NOT NULL DEFAULT 'UTC',
    queue_name        text,                   -- the PGMQ queue (jobs)
    priority          integer,
    description       text,
    -- enabled: in force now (the dashboard's Enable/Disable writes it); declared_enabled: what
    -- the declaration said last, so a toggle survives restarts until the declaration changes.
    enabled           boolean NOT NULL DEFAULT true,
    declared_enabled  boolean NOT NULL DEFAULT true,
    static            boolean NOT NULL DEFAULT true,
    -- Ticks before this are never caught up (a new, changed or re-enabled task starts here).
    schedule_from     timestamptz NOT NULL DEFAULT now(),
    next_run_at       timestamptz,
    last_run_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (jsonb_typeof(arguments) = 'object')
);

-- One row per fired tick: the primary key is the claim.
CREATE TABLE pgbus.recurring_executions (
    task_key    text NOT NULL,
    run_at      timestamptz NOT NULL,
    manual      boolean NOT NULL DEFAULT false,  -- "Run now", not a tick
    queue_name  text,
    msg_id      bigint,
    workflow_id uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_key, run_at)
);
CREATE INDEX recurring_executions_run_at_idx ON pgbus.recurring_executions (run_at);

-- One row per declared deploy task.
CREATE TABLE pgbus.deploy_tasks (
    key               text PRIMARY KEY CHECK (key ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$'),
    target            text NOT NULL DEFAULT 'job' CHECK (target IN ('job', 'workflow')),
    class_name        text NOT NULL CHECK (btrim(class_name) <> ''),
    arguments         jsonb NOT NULL DEFAULT '{}',
    queue_name        text,
    priority          integer,
    description       text,
    version           text,
    every_deploy      boolean NOT NULL DEFAULT false,
    enabled           boolean NOT NULL DEFAULT true,
    declared_enabled  boolean NOT NULL DEFAULT true,
    declared_revision text,                   -- the app revision whose declaration this is
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (jsonb_typeof(arguments) = 'object'),
    CHECK ((version IS NOT NULL AND btrim(version) <> '') <> every_deploy)
);

-- Run history. `arm` is what a task runs once for: 'version:<v>' or 'revision:<r>'; the
-- partial unique index is the claim (a manual "Run now" claims nothing).
CREATE TABLE pgbus.deploy_task_runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_key     text NOT NULL,
    arm          text NOT NULL,
    version      text,
    app_revision text,
    manual       boolean NOT NULL DEFAULT false,
    queue_name   text,
    msg_id       bigint,
    workflow_id  uuid,
    enqueued_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX deploy_task_runs_claim_idx ON pgbus.deploy_task_runs (task_key, arm) WHERE NOT manual;
CREATE INDEX deploy_task_runs_task_idx ON pgbus.deploy_task_runs (task_key, enqueued_at DESC);
CREATE INDEX deploy_task_runs_enqueued_idx ON pgbus.deploy_task_runs (enqueued_at);
