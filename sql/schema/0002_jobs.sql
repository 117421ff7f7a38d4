-- The job layer's bookkeeping. Messages themselves live in PGMQ queues (pgmq.q_<queue>).

-- Batches: counters kept in the same transactions as their members' archive or dead letter.
-- A batch is 'open' while its members are being added (inside the caller's transaction), then
-- 'processing' until completed + discarded = total, then 'finished' (callbacks sent then).
CREATE TABLE pgbus.batches (
    batch_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    description    text,
    properties     jsonb NOT NULL DEFAULT '{}',
    -- Callback jobs: {"job_class": ..., "queue": ...} or NULL.
    on_complete    jsonb,
    on_success     jsonb,
    on_discard     jsonb,
    total_jobs     integer NOT NULL DEFAULT 0 CHECK (total_jobs >= 0),
    completed_jobs integer NOT NULL DEFAULT 0 CHECK (completed_jobs >= 0),
    discarded_jobs integer NOT NULL DEFAULT 0 CHECK (discarded_jobs >= 0),
    status         text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'processing', 'finished')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CHECK (completed_jobs + discarded_jobs <= total_jobs),
    CHECK ((status = 'finished') = (finished_at IS NOT NULL))
);
CREATE INDEX batches_finished_idx ON pgbus.batches (finished_at) WHERE status = 'finished';

-- The last failure of a message that will be retried (cleared on success or dead letter).
CREATE TABLE pgbus.job_failures (
    queue_name    text NOT NULL,
    msg_id        bigint NOT NULL,
    job_class     text,
    error_class   text NOT NULL,
    error_message text NOT NULL,
    backtrace     text,
    read_ct       integer NOT NULL,
    failed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_name, msg_id)
);

-- One row per execution outcome, for the dashboard's throughput and latency.
CREATE TABLE pgbus.job_stats (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_class          text NOT NULL,
    queue_name         text NOT NULL,
    status             text NOT NULL CHECK (status IN ('success', 'failed', 'dead_lettered')),
    duration_ms        integer NOT NULL DEFAULT 0,
    enqueue_latency_ms bigint,
    retry_count        integer NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_stats_created_idx ON pgbus.job_stats (created_at);
CREATE INDEX job_stats_class_idx ON pgbus.job_stats (job_class, created_at);

-- Live pgbus processes (supervisor, workers, dispatcher), kept by heartbeats.
CREATE TABLE pgbus.processes (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              text NOT NULL CHECK (kind IN ('supervisor', 'worker', 'dispatcher')),
    hostname          text NOT NULL,
    pid               integer NOT NULL,
    app_revision      text,
    metadata          jsonb NOT NULL DEFAULT '{}',
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX processes_heartbeat_idx ON pgbus.processes (last_heartbeat_at);
