-- Facts about a run kept on its row for the dashboard's pages (migration 0015), and the
-- stuck-run classification read through the indexes that made possible.

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

-- Runs that need a person, with why: paused_error (a step failed and the run paused),
-- stalled (its worker died or a step hung: paused by the stall action, or running past its
-- timeout / the stall threshold), paused_manual (paused by a step or an operator), overdue (its
-- step was due more than overdue_after ago and has not started), waiting_overdue (its step has
-- waited longer than waiting_threshold). The gauge, the attention page, the home card and MCP
-- all read this. (It replaces the first version in 080_workflow_commands.sql, same answer.)
--
-- Set-based, never a look-up per ongoing run: paused runs come from workflows_paused_idx with
-- their error class on the run; the others from their open attempt. An attempt starts, waits
-- or is overdue only at or after its scheduled_at, so only open attempts due longer ago than
-- the smallest threshold (workflow_steps_open_idx) can be stuck, besides those with a timeout
-- of their own (workflow_steps_open_timed_idx).
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck(
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS TABLE (workflow_id uuid, workflow_class text, step_name text, reason text,
                 error_class text, since timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE w.pause_cause WHEN 'error' THEN 'paused_error' WHEN 'stall' THEN 'stalled'
                              ELSE 'paused_manual' END,
           w.error_class, w.updated_at
    FROM pgbus.workflows w
    WHERE w.pause_cause IS NOT NULL AND w.ended_at IS NULL  -- (paused: workflows_paused_idx)
    UNION ALL
    SELECT w.workflow_id, w.workflow_class, w.current_step,
           CASE w.status WHEN 'running' THEN 'stalled' WHEN 'waiting' THEN 'waiting_overdue'
                         ELSE 'overdue' END,
           s.error_class,
           CASE w.status WHEN 'running' THEN s.started_at WHEN 'waiting' THEN s.waiting_since
                         ELSE s.scheduled_at END
    FROM (SELECT o.* FROM pgbus.workflow_steps o
          WHERE o.ended_at IS NULL
            AND o.scheduled_at < now() - least(stall_threshold, overdue_after, waiting_threshold)
          UNION ALL
          SELECT o.* FROM pgbus.workflow_steps o
          WHERE o.ended_at IS NULL AND o.timeout IS NOT NULL
            AND o.scheduled_at >= now() - least(stall_threshold, overdue_after, waiting_threshold)) s
    JOIN pgbus.workflows w ON w.workflow_id = s.workflow_id AND w.current_step_id = s.step_id
    WHERE w.ended_at IS NULL AND w.pause_cause IS NULL
      AND ((w.status = 'running' AND s.status = 'running'
            AND s.started_at < now() - coalesce(s.timeout, stall_threshold))
           OR (w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - overdue_after)
           OR (w.status = 'waiting' AND s.status = 'waiting' AND s.waiting_since < now() - waiting_threshold))
$$;
