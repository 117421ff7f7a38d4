-- The workflow read layer: what the Python API, the dashboard, the MCP server and metrics read
-- about runs, attempts, signals and events, one path for all of them. Each view puts its own
-- columns first and the table's columns after (`w.*`), so a column a later migration adds
-- shows up at the end without breaking CREATE OR REPLACE. (Migrate drops and re-creates every
-- view around pending migrations, so none holds a migration back.)

-- Runs, with their current step's state and whether they started on an older definition.
CREATE OR REPLACE VIEW pgbus.workflow_runs_overview AS
SELECT s.status AS current_step_status,
       s.attempt AS current_attempt,
       s.scheduled_at AS current_step_scheduled_at,
       s.started_at AS current_step_started_at,
       s.error_class AS current_error_class,
       s.error ->> 'message' AS current_error_message,
       s.wait_for AS current_wait_for,
       s.waiting_since AS current_waiting_since,
       (d.digest IS DISTINCT FROM w.definition_digest) AS definition_outdated,
       w.*
FROM pgbus.workflows w
LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
LEFT JOIN pgbus.workflow_definitions d ON d.workflow_class = w.workflow_class;

-- Every step attempt, with its run's class and how long it ran.
CREATE OR REPLACE VIEW pgbus.workflow_attempts AS
SELECT w.workflow_class,
       s.ended_at - s.started_at AS duration,
       s.*
FROM pgbus.workflow_steps s
JOIN pgbus.workflows w ON w.workflow_id = s.workflow_id;

-- Every signal delivered to a run (pending -> claimed -> consumed).
CREATE OR REPLACE VIEW pgbus.workflow_signal_log AS
SELECT w.workflow_class,
       g.*
FROM pgbus.workflow_signals g
JOIN pgbus.workflows w ON w.workflow_id = g.workflow_id;

-- The audit trail of every run: who did what, when, and why.
CREATE OR REPLACE VIEW pgbus.workflow_audit_trail AS
SELECT w.workflow_class,
       e.*
FROM pgbus.workflow_events e
JOIN pgbus.workflows w ON w.workflow_id = e.workflow_id;
