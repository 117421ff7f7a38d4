-- Two filters of the run list read every matching run's row and sort them for a page of 25:
-- paused runs (status=paused: about 5,000 rows at 1,000,000 runs, read to show 25) and ongoing
-- runs with an error class (the default status with error_class=...), whose planner estimate
-- (every run with the error class, times the ongoing share) is far below the truth, since a
-- run with an error class is mostly a stuck, ongoing one. Both read a page newest first from
-- these, and count from them alone.
--
-- HOT: these name only columns that other indexes already name (created_at, workflow_id and
-- error_class as keys; pause_cause, error_class and ended_at in predicates), so no update that
-- is HOT today stops being HOT. A healthy run is in neither (not paused, no error class): a
-- step's writes add no entry; a run enters when it pauses or its attempt fails (updates that
-- change an indexed column, never HOT).

-- Paused runs, newest first (status=paused).
CREATE INDEX workflows_paused_recent_idx ON pgbus.workflows (created_at DESC, workflow_id DESC)
    WHERE pause_cause IS NOT NULL AND ended_at IS NULL;
-- Ongoing runs by their current attempt's error class, newest first (error_class=... with the
-- default status, and with paused).
CREATE INDEX workflows_error_class_ongoing_idx
    ON pgbus.workflows (error_class, created_at DESC, workflow_id DESC)
    WHERE error_class IS NOT NULL AND ended_at IS NULL;
