-- The workflow insights (pgbus.workflow_definitions_overview and the pgbus.workflow_class_*
-- blocks) read runs by class and end time, and attempts by class and end time.
--
-- No column a step changes (status, current step, updated_at; an attempt's status and
-- started_at) is named here, so the updates of a step stay HOT. ended_at changes once per run
-- and once per attempt, and the partial indexes of 0004 already name it, so the update that
-- ends a run or an attempt was never HOT: each index adds one entry at that moment only.

-- Runs of a class by when they ended (finished and cancelled per window, durations).
CREATE INDEX workflows_class_ended_idx
    ON pgbus.workflows (workflow_class, ended_at, created_at)
    WHERE ended_at IS NOT NULL;

-- An attempt carries its run's class as run_class (written once, by
-- pgbus.workflow_schedule_step), so the attempts of one class that ended in a window are one
-- index range, not a walk through every run of the class. (Not named workflow_class: the view
-- pgbus.workflow_attempts adds the run's workflow_class beside every column of the table.)
ALTER TABLE pgbus.workflow_steps ADD COLUMN run_class text;
UPDATE pgbus.workflow_steps s SET run_class = w.workflow_class
FROM pgbus.workflows w WHERE w.workflow_id = s.workflow_id;
CREATE INDEX workflow_steps_class_ended_idx
    ON pgbus.workflow_steps (run_class, ended_at)
    WHERE ended_at IS NOT NULL;
