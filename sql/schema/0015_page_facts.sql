-- Facts the dashboard's pages read often, kept where an index can find them.

-- The run's current step's error class (NULL when that attempt has none), kept by triggers
-- (below): the run list's error-class filter and the attention groups read it from the run
-- instead of looking up each run's step. It changes only when an attempt fails or the run
-- moves on from a failed one, so the step hot path's run updates stay HOT.
ALTER TABLE pgbus.workflows ADD COLUMN error_class text;
UPDATE pgbus.workflows w SET error_class = s.error_class
FROM pgbus.workflow_steps s
WHERE s.step_id = w.current_step_id AND s.error_class IS NOT NULL;
CREATE INDEX workflows_error_class_recent_idx
    ON pgbus.workflows (error_class, created_at DESC, workflow_id DESC) WHERE error_class IS NOT NULL;
-- Paused runs (pause_cause is set exactly while a run is paused, and a paused run has not
-- ended): the attention page, the home card and the stuck gauge start from these. No column a
-- step changes, so run updates stay HOT.
CREATE INDEX workflows_paused_idx ON pgbus.workflows (workflow_class)
    WHERE pause_cause IS NOT NULL AND ended_at IS NULL;
-- Open attempts with a timeout of their own (they may stall before the thresholds say).
CREATE INDEX workflow_steps_open_timed_idx
    ON pgbus.workflow_steps (scheduled_at) WHERE ended_at IS NULL AND timeout IS NOT NULL;

-- The bodies live in sql/functions/301_workflow_run_facts.sql (re-applied by every migrate);
-- these first versions let the triggers be created here.
CREATE OR REPLACE FUNCTION pgbus.workflow_step_error_class_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus.workflows w SET error_class = NEW.error_class
    WHERE w.workflow_id = NEW.workflow_id AND w.current_step_id = NEW.step_id
      AND w.ended_at IS NULL  -- (an ended run never changes: a late attempt's end leaves it)
      AND w.error_class IS DISTINCT FROM NEW.error_class;
    RETURN NULL;
END;
$$;
CREATE OR REPLACE FUNCTION pgbus.workflow_current_step_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.error_class := (SELECT s.error_class FROM pgbus.workflow_steps s WHERE s.step_id = NEW.current_step_id);
    RETURN NEW;
END;
$$;
-- An attempt's error class set or changed: its run's copy follows (when it is the current one).
CREATE TRIGGER workflow_steps_error_class
    AFTER UPDATE OF error_class ON pgbus.workflow_steps
    FOR EACH ROW WHEN (NEW.error_class IS DISTINCT FROM OLD.error_class)
    EXECUTE FUNCTION pgbus.workflow_step_error_class_changed();
-- A run with an error class moved to another attempt: it takes that attempt's (new attempts
-- start without one, so a run without an error class skips this on every step).
CREATE TRIGGER workflows_current_step_error_class
    BEFORE UPDATE OF current_step_id ON pgbus.workflows
    FOR EACH ROW WHEN (OLD.error_class IS NOT NULL AND NEW.current_step_id IS DISTINCT FROM OLD.current_step_id)
    EXECUTE FUNCTION pgbus.workflow_current_step_changed();

-- The dashboard's last count of each big queue (one above the pages' count limit), reused for
-- a few seconds so that a page over many big queues does not probe every one of them on each
-- refresh. Unlogged: it is a cache, rebuilt by the next page after a crash.
CREATE UNLOGGED TABLE pgbus.queue_figures_cache (
    queue_name           text PRIMARY KEY,
    counted_at           timestamptz NOT NULL,
    visible              bigint,
    not_visible          bigint,
    visible_unread       bigint,
    oldest_enqueued_at   timestamptz,
    oldest_claimable_vt  timestamptz,
    total_messages       bigint
);
