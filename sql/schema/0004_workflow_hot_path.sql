-- The step hot path writes a run row and an attempt row two or three times per step. This
-- migration makes those writes cheaper without loosening what the rows may hold.

-- Cheaper CHECKs, same rules. PostgreSQL reads a table's CHECK expressions back from their
-- stored text for every INSERT or UPDATE statement on the table, all of them on any update; a
-- list of allowed values is long in that form (each value byte by byte), and on this path the
-- nine CHECKs of these two tables cost a tenth of a step. One CHECK per table now calls an
-- immutable PL/pgSQL function holding the same rules: short to read back, and its plan is kept
-- for the session. A bad row is still refused with check_violation, before anything is written.
-- (To allow a new status, replace the function in a later migration.)
CREATE FUNCTION pgbus.workflow_row_valid(
    status text, pause_cause text, ended_at timestamptz, subject_type text, subject_id text,
    arguments jsonb
) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN status IN ('ready', 'running', 'waiting', 'paused', 'finished', 'cancelled')
       AND (pause_cause IS NULL OR pause_cause IN ('error', 'manual', 'stall'))
       AND (status = 'paused') = (pause_cause IS NOT NULL)
       AND (status IN ('finished', 'cancelled')) = (ended_at IS NOT NULL)
       AND (subject_type IS NULL) = (subject_id IS NULL)
       AND jsonb_typeof(arguments) = 'object';
END;
$$;
ALTER TABLE pgbus.workflows
    DROP CONSTRAINT workflows_status_check,
    DROP CONSTRAINT workflows_pause_cause_check,
    DROP CONSTRAINT workflows_arguments_check,
    DROP CONSTRAINT workflows_check,   -- subject type and id together
    DROP CONSTRAINT workflows_check1,  -- paused with a cause
    DROP CONSTRAINT workflows_check2,  -- ended when finished or cancelled
    ADD CONSTRAINT workflows_row_valid
        CHECK (pgbus.workflow_row_valid(status, pause_cause, ended_at, subject_type, subject_id, arguments));

CREATE FUNCTION pgbus.workflow_step_row_valid(status text, attempt integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN status IN ('scheduled', 'running', 'completed', 'skipped', 'failed', 'interrupted',
                      'cancelled', 'stalled', 'superseded')
       AND attempt >= 1;
END;
$$;
ALTER TABLE pgbus.workflow_steps
    DROP CONSTRAINT workflow_steps_status_check,
    DROP CONSTRAINT workflow_steps_attempt_check,
    ADD CONSTRAINT workflow_steps_row_valid CHECK (pgbus.workflow_step_row_valid(status, attempt));

-- HOT updates: a row updated without changing any indexed column (key or partial-index
-- predicate) gets its new version on the same page and no new index entries. A run row changes
-- status, current step and updated_at on every step, so no index may name those columns; an
-- attempt row changes status and started_at when it begins, so none may name those either.
-- ended_at changes once per run (and once per attempt): indexes use "ended_at IS NULL" for
-- "ongoing", which the CHECK on workflows makes the same as "not finished or cancelled", and
-- which for an attempt means scheduled or running (every way an attempt ends sets ended_at).
DROP INDEX pgbus.workflows_status_idx;
DROP INDEX pgbus.workflows_one_ongoing_per_subject;
CREATE UNIQUE INDEX workflows_one_ongoing_per_subject
    ON pgbus.workflows (workflow_class, subject_type, subject_id)
    WHERE subject_id IS NOT NULL AND ended_at IS NULL;
-- Ongoing runs (the gauge, the sweep, stuck runs): few beside the finished ones.
CREATE INDEX workflows_ongoing_idx ON pgbus.workflows (workflow_class, created_at) WHERE ended_at IS NULL;

DROP INDEX pgbus.workflow_steps_scheduled_idx;
DROP INDEX pgbus.workflow_steps_running_idx;
-- Open attempts (scheduled or running) by due time: the sweep's overdue, lost and stalled ones.
CREATE INDEX workflow_steps_open_idx ON pgbus.workflow_steps (scheduled_at) WHERE ended_at IS NULL;

-- Room on each page for the next versions of its rows, so that updates can stay HOT.
ALTER TABLE pgbus.workflows SET (fillfactor = 70);
ALTER TABLE pgbus.workflow_steps SET (fillfactor = 80);
