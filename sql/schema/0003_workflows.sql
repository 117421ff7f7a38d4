-- Durable workflows: runs, one row per step attempt, the audit trail, and the registered
-- definitions that tell SQL which step follows which.

-- A workflow class as its code last registered it: steps in order with their options.
CREATE TABLE pgbus.workflow_definitions (
    workflow_class text PRIMARY KEY,
    -- [{"name": "welcome", "wait": 0, "timeout": null, "job_options": {}}, ...]; wait and
    -- timeout in seconds.
    steps          jsonb NOT NULL CHECK (jsonb_typeof(steps) = 'array'),
    removed_steps  text[] NOT NULL DEFAULT '{}',
    digest         text NOT NULL,
    queue          text NOT NULL,
    registered_at  timestamptz NOT NULL DEFAULT now()
);

-- One run of a workflow (the seed's pgbus_workflows).
CREATE TABLE pgbus.workflows (
    workflow_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workflow_class    text NOT NULL,
    subject_type      text,
    subject_id        text,
    arguments         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(arguments) = 'object'),
    -- ready: its current step is scheduled; running: an attempt runs; waiting: parked at a
    -- gate; paused / finished / cancelled.
    status            text NOT NULL DEFAULT 'ready'
                      CHECK (status IN ('ready', 'running', 'waiting', 'paused', 'finished', 'cancelled')),
    pause_cause       text CHECK (pause_cause IN ('error', 'manual', 'stall')),
    current_step      text,
    current_step_id   bigint,
    idempotency_key   text,
    definition_digest text NOT NULL,
    rerun_of          uuid REFERENCES pgbus.workflows (workflow_id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    ended_at          timestamptz,
    CHECK ((subject_type IS NULL) = (subject_id IS NULL)),
    CHECK ((status = 'paused') = (pause_cause IS NOT NULL)),
    CHECK ((status IN ('finished', 'cancelled')) = (ended_at IS NOT NULL))
);
-- At most one ongoing run per (class, subject); subject-less runs are not limited.
CREATE UNIQUE INDEX workflows_one_ongoing_per_subject
    ON pgbus.workflows (workflow_class, subject_type, subject_id)
    WHERE subject_id IS NOT NULL AND status IN ('ready', 'running', 'waiting', 'paused');
CREATE UNIQUE INDEX workflows_idempotency_key
    ON pgbus.workflows (workflow_class, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX workflows_status_idx ON pgbus.workflows (status, updated_at);
CREATE INDEX workflows_class_created_idx ON pgbus.workflows (workflow_class, created_at DESC);
CREATE INDEX workflows_ended_idx ON pgbus.workflows (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX workflows_rerun_of_idx ON pgbus.workflows (rerun_of) WHERE rerun_of IS NOT NULL;

-- One row per step attempt (the seed's pgbus_workflow_steps).
CREATE TABLE pgbus.workflow_steps (
    step_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id   uuid NOT NULL REFERENCES pgbus.workflows (workflow_id) ON DELETE CASCADE,
    step_name     text NOT NULL,
    attempt       integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    -- scheduled -> running -> completed | skipped | failed | interrupted (pause, reattempt) |
    -- cancelled | stalled; superseded: replaced before it ran, or ended after its run moved on.
    status        text NOT NULL DEFAULT 'scheduled'
                  CHECK (status IN ('scheduled', 'running', 'completed', 'skipped', 'failed',
                                    'interrupted', 'cancelled', 'stalled', 'superseded')),
    -- The verb the attempt ended with (complete, pause, cancel, reattempt, skip, finished).
    outcome       text,
    queue         text NOT NULL,
    msg_id        bigint,
    scheduled_at  timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    ended_at      timestamptz,
    timeout       interval,
    output        jsonb,
    error         jsonb,
    error_class   text,
    worker        text,
    app_revision  text,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflow_steps_run_idx ON pgbus.workflow_steps (workflow_id, step_id);
CREATE INDEX workflow_steps_scheduled_idx ON pgbus.workflow_steps (scheduled_at) WHERE status = 'scheduled';
CREATE INDEX workflow_steps_running_idx ON pgbus.workflow_steps (started_at) WHERE status = 'running';

ALTER TABLE pgbus.workflows
    ADD CONSTRAINT workflows_current_step_fk FOREIGN KEY (current_step_id)
        REFERENCES pgbus.workflow_steps (step_id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;

-- The append-only audit trail (the seed's pgbus_workflow_events).
CREATE TABLE pgbus.workflow_events (
    event_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id uuid NOT NULL REFERENCES pgbus.workflows (workflow_id) ON DELETE CASCADE,
    step_id     bigint,
    event       text NOT NULL,
    actor       text,
    reason      text,
    details     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX workflow_events_run_idx ON pgbus.workflow_events (workflow_id, event_id);
