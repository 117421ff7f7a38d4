-- Facts about a run kept on its row for the dashboard's pages (migration 0015); the stuck-run
-- classification reads them (pgbus.workflow_stuck, 080_workflow_commands.sql).

-- workflows.error_class follows the run's current attempt's error class: set when that
-- attempt's error class is (an AFTER UPDATE trigger on workflow_steps, firing only when the
-- value changes), taken from the new attempt when a run that has one moves on (a BEFORE
-- UPDATE trigger on workflows, firing only then). A step's ordinary progress fires neither.
-- An ended run keeps the one it ended with (an attempt that ends late changes no ended run).
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
