-- The dashboard's state: paused queues (workers skip them: pgbus.read_jobs) and the audit log
-- of every operator action (who, what, on what, and the answer it got).

CREATE TABLE pgbus.queue_pauses (
    queue_name text PRIMARY KEY,
    reason     text,
    paused_by  text NOT NULL,
    paused_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pgbus.operator_actions (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor   text NOT NULL,
    action  text NOT NULL,
    target  jsonb NOT NULL DEFAULT '{}',
    outcome jsonb NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_actions_at_idx ON pgbus.operator_actions (at);

-- The failed-jobs list pages newest first by (failed_at, queue_name, msg_id).
CREATE INDEX job_failures_failed_at_idx ON pgbus.job_failures (failed_at, queue_name, msg_id);
-- The number of attempts a failed job is allowed (its policy's max_retries + 1), for the
-- sentence saying what happens next; NULL on rows written before this column.
ALTER TABLE pgbus.job_failures ADD COLUMN max_attempts integer;
