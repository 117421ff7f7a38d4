-- Indexes the dashboard's workflow pages need (pgbus.workflow_list and friends). None names a
-- column a step changes (status, current step, updated_at), so run updates stay HOT.

-- Every run, newest first (status "all", a created-at range).
CREATE INDEX workflows_recent_idx ON pgbus.workflows (created_at DESC, workflow_id DESC);
-- Ongoing runs, newest first (the list's default).
CREATE INDEX workflows_ongoing_recent_idx ON pgbus.workflows (created_at DESC, workflow_id DESC)
    WHERE ended_at IS NULL;
-- One subject's runs, newest first.
CREATE INDEX workflows_subject_recent_idx
    ON pgbus.workflows (subject_type, subject_id, created_at DESC, workflow_id DESC)
    WHERE subject_id IS NOT NULL;
