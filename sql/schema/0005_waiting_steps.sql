-- Waiting steps: an attempt can park ('waiting') at a signal gate or on a fan-out batch, and
-- signals delivered to a run wait in their own table until a step takes them.

-- An attempt's statuses gain 'waiting' (the table's CHECK calls this function).
CREATE OR REPLACE FUNCTION pgbus.workflow_step_row_valid(status text, attempt integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN status IN ('scheduled', 'running', 'waiting', 'completed', 'skipped', 'failed',
                      'interrupted', 'cancelled', 'stalled', 'superseded')
       AND attempt >= 1;
END;
$$;

ALTER TABLE pgbus.workflow_steps
    -- The signal name a parked gate waits for, or the fan-out batch a parked step waits on.
    ADD COLUMN wait_for       text,
    ADD COLUMN batch_id       uuid,
    -- When the attempt first parked; its wait deadline (NULL while the run is paused, when
    -- wait_remaining holds what was left, so paused time does not count against the wait).
    ADD COLUMN waiting_since  timestamptz,
    ADD COLUMN wait_deadline  timestamptz,
    ADD COLUMN wait_remaining interval,
    -- Woken by its wait timeout (on_timeout 'run'): the body runs with timed_out true.
    ADD COLUMN timed_out      boolean NOT NULL DEFAULT false,
    -- The signal the attempt took.
    ADD COLUMN signal_id      bigint;

-- Signals delivered to runs (the seed's pgbus_workflow_signals): pending until a step takes
-- one (claimed), consumed when that step completes.
CREATE TABLE pgbus.workflow_signals (
    signal_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id     uuid NOT NULL REFERENCES pgbus.workflows (workflow_id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (btrim(name) <> '' AND length(name) <= 255),
    payload         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
    -- NULL or a real key: a blank key is no key.
    idempotency_key text CHECK (btrim(idempotency_key) <> '' AND length(idempotency_key) <= 255),
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'claimed', 'consumed')),
    -- The step (and its attempt) that took it.
    step_name       text,
    step_id         bigint,
    actor           text,
    reason          text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_at      timestamptz,
    consumed_at     timestamptz,
    CHECK ((status = 'pending') = (claimed_at IS NULL)),
    CHECK ((status = 'consumed') = (consumed_at IS NOT NULL))
);
CREATE UNIQUE INDEX workflow_signals_idempotency_key
    ON pgbus.workflow_signals (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX workflow_signals_run_idx ON pgbus.workflow_signals (workflow_id, signal_id);
CREATE INDEX workflow_signals_pending_idx
    ON pgbus.workflow_signals (workflow_id, name, signal_id) WHERE status = 'pending';
