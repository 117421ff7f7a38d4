-- Ongoing runs by id: pgbus.workflow_stuck looks up the run of each open attempt that may be
-- stuck through this index (ongoing runs only, so fewer levels than the primary key). It names
-- no column a step changes (the run's id, and ended_at in its predicate, which only a run's end
-- changes), so the step hot path's run updates stay HOT; a run's start adds one entry.
CREATE UNIQUE INDEX workflows_ongoing_id_idx ON pgbus.workflows (workflow_id) WHERE ended_at IS NULL;
