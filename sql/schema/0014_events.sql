-- The event bus: which (event, handler) pairs an idempotent handler has claimed and finished,
-- and consumer processes in pgbus.processes. The bindings themselves are PGMQ's
-- (pgmq.topic_bindings), made by pgbus.subscribe.

CREATE TABLE IF NOT EXISTS pgbus.processed_events (
    event_id     uuid NOT NULL,
    handler      text NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,  -- NULL: claimed by a run that has not finished (or crashed)
    PRIMARY KEY (event_id, handler)
);
CREATE INDEX IF NOT EXISTS processed_events_claimed_idx ON pgbus.processed_events (claimed_at);

ALTER TABLE pgbus.processes DROP CONSTRAINT IF EXISTS processes_kind_check;
ALTER TABLE pgbus.processes ADD CONSTRAINT processes_kind_check
    CHECK (kind IN ('supervisor', 'worker', 'dispatcher', 'scheduler', 'consumer'));
