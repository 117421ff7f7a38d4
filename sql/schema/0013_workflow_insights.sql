-- The workflow insights (pgbus.workflow_definitions_overview and the pgbus.workflow_class_*
-- blocks) read runs by class and end time: the runs that finished or were cancelled in a
-- window, per class, and through them the attempts that ended in it.
--
-- No column a step changes (status, current step, updated_at) is named here, so run updates
-- stay HOT. ended_at changes once per run, and the partial indexes of 0004 already name it, so
-- the update that ends a run was never HOT: this index adds one entry at that moment only.
CREATE INDEX workflows_class_ended_idx
    ON pgbus.workflows (workflow_class, ended_at, created_at)
    WHERE ended_at IS NOT NULL;
