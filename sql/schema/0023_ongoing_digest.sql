-- The insights list (sql/functions/510_workflow_definitions_overview.sql) counts each class's
-- ongoing runs, and tells the runs that may sit on a removed step from the others, out of
-- workflows_ongoing_idx alone: the run's definition digest joins it as a payload column. A run
-- never changes its digest, so run updates stay HOT.
CREATE INDEX workflows_ongoing_digest_idx ON pgbus.workflows (workflow_class, created_at)
    INCLUDE (definition_digest) WHERE ended_at IS NULL;
DROP INDEX pgbus.workflows_ongoing_idx;
ALTER INDEX pgbus.workflows_ongoing_digest_idx RENAME TO workflows_ongoing_idx;
