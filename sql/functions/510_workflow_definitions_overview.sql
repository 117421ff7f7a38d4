-- Workflow insights: the list of classes (/workflows/definitions and the MCP tool
-- pgbus_workflow_definitions). Window, retention and as_of: see 500_workflow_insights_window.sql.

-- Every workflow class name still in the runs table, read by skipping through
-- workflows_class_created_idx (one probe per class, not a scan of the runs).
CREATE OR REPLACE FUNCTION pgbus.workflow_run_classes() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE c AS (
        SELECT min(w.workflow_class) AS cls FROM pgbus.workflows w
        UNION ALL
        SELECT (SELECT min(w.workflow_class) FROM pgbus.workflows w WHERE w.workflow_class > c.cls)
        FROM c WHERE c.cls IS NOT NULL
    )
    SELECT cls FROM c WHERE cls IS NOT NULL
$$;

-- (An unused helper of the first release of this file.)
DROP FUNCTION IF EXISTS pgbus.workflow_live_steps(text);

-- One row per workflow class: every registered class (pgbus.workflow_definitions) and every
-- class name still in pgbus.workflows, by name. Per class:
--   registered        a definition row exists (whether this process can load the class is
--                     the caller's to say: "definition not loaded"); step_count its live
--                     steps (NULL when not registered)
--   ongoing, paused   runs not finished or cancelled now (created before `until`), and how
--                     many of them are paused: list filter status=ongoing|paused,
--                     workflow_class, created_to=until
--   stuck             pgbus.workflow_stuck's runs of the class now (the attention page)
--   finished, cancelled  runs that ended so in the window: list filter status=finished|
--                     cancelled, workflow_class, ended_from=since, ended_to=until
--   duration_p50, duration_p95  end to end (created -> ended) of the runs finished in the
--                     window, seconds (percentile_cont); NULL when none
--   on_removed_steps  ongoing runs whose current step is not a live step of the registered
--                     definition (removed since they started), and removed_steps those steps
--                     (list filter status=ongoing, workflow_class, step, created_to=until);
--                     0 and '{}' for a class without a definition. Only the runs that may be
--                     on one are read (below); every other figure comes from indexes.
--   since, until      the window (the same on every row)
CREATE OR REPLACE FUNCTION pgbus.workflow_definitions_overview(
    window_name text DEFAULT '24h',
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now(),
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS TABLE (workflow_class text, registered boolean, step_count integer, ongoing bigint,
                 paused bigint, stuck bigint, finished bigint, cancelled bigint,
                 duration_p50 double precision, duration_p95 double precision,
                 on_removed_steps bigint, removed_steps text[], since timestamptz,
                 until timestamptz)
LANGUAGE plpgsql STABLE
-- (The durations' sort stays in memory: 30 days can hold a few hundred thousand runs. No JIT:
-- compiling costs more than these queries take.)
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    win record;
BEGIN
    SELECT * INTO win FROM pgbus.workflow_insights_window(window_name, retention, as_of);
    RETURN QUERY
    WITH defs AS (
        SELECT d.workflow_class AS cls, d.digest, d.registered_at,
               (SELECT array_agg(x ->> 'name') FROM jsonb_array_elements(d.steps) x
                WHERE NOT coalesce((x ->> 'removed')::boolean, false)) AS live
        FROM pgbus.workflow_definitions d
    ),
    classes AS (
        SELECT cls FROM defs UNION SELECT c FROM pgbus.workflow_run_classes() c
    ),
    -- Ongoing runs per class, counted from indexes without reading a run: those created before
    -- `until` (workflows_ongoing_idx) and the paused ones (workflows_paused_idx, less the few
    -- created at or after `until`); stuck as pgbus.workflow_stuck says, whatever their creation
    -- time: every paused run, and each run stuck at an open attempt
    -- (pgbus.workflow_stuck_at_attempts).
    counted AS (
        SELECT w.workflow_class AS cls,
               count(*) FILTER (WHERE w.created_at < win.until) AS n,
               -- Runs that may sit on a removed step: all but those that started on the class's
               -- definition after it was registered (pgbus.workflow_register stamps the moment
               -- with the clock), for a step can only move to a live step of the definition
               -- registered then. Older runs, and a run that read the definition before a new
               -- one committed, may have moved to a step since removed.
               count(*) FILTER (WHERE w.created_at < least(d.registered_at, win.until)) AS unsure_before,
               count(*) FILTER (WHERE w.created_at >= d.registered_at AND w.created_at < win.until
                                  AND w.definition_digest <> d.digest) AS unsure_since
        FROM pgbus.workflows w
        LEFT JOIN defs d ON d.cls = w.workflow_class
        WHERE w.ended_at IS NULL
        GROUP BY 1
    ),
    paused AS (
        SELECT w.workflow_class AS cls, count(*) AS n
        FROM pgbus.workflows w
        WHERE w.pause_cause IS NOT NULL AND w.ended_at IS NULL
        GROUP BY 1
    ),
    paused_late AS (
        SELECT w.workflow_class AS cls, count(*) AS n
        FROM pgbus.workflows w
        WHERE w.pause_cause IS NOT NULL AND w.ended_at IS NULL AND w.created_at >= win.until
        GROUP BY 1
    ),
    overdue AS (
        SELECT k.workflow_class AS cls, count(*) AS n
        FROM pgbus.workflow_stuck_at_attempts(stall_threshold, overdue_after, waiting_threshold) k
        GROUP BY 1
    ),
    -- A current step counts as removed when the class has a definition and the step is not one
    -- of its live steps; only the classes with unsure runs read them, and only those runs.
    removed AS (
        SELECT c.cls, r.n, r.steps
        FROM counted c
        JOIN defs d ON d.cls = c.cls
        CROSS JOIN LATERAL (
            SELECT count(*) AS n, coalesce(array_agg(DISTINCT u.step ORDER BY u.step), '{}') AS steps
            FROM (SELECT w.current_step AS step FROM pgbus.workflows w
                  WHERE w.workflow_class = c.cls AND w.ended_at IS NULL
                    AND w.created_at < least(d.registered_at, win.until)
                  UNION ALL
                  SELECT w.current_step FROM pgbus.workflows w
                  WHERE c.unsure_since > 0 AND w.workflow_class = c.cls AND w.ended_at IS NULL
                    AND w.created_at >= d.registered_at AND w.created_at < win.until
                    AND w.definition_digest <> d.digest) u
            WHERE u.step <> ALL (coalesce(d.live, '{}'))
        ) r
        WHERE c.unsure_before + c.unsure_since > 0
    ),
    live_ended AS MATERIALIZED (
        SELECT x.run_class AS cls, (x.status = 'finished')::int AS finished,
               (x.status = 'cancelled')::int AS cancelled,
               CASE WHEN x.status = 'finished' THEN x.secs END AS secs
        FROM pgbus.workflow_insights_live_runs(NULL, win.since, win.until) x
    ),
    span AS MATERIALIZED (
        SELECT * FROM pgbus.workflow_insights_span(win.since, win.until)
    ),
    outside AS MATERIALIZED (
        SELECT o.* FROM (VALUES (1)) one(x) LEFT JOIN span s ON true
        CROSS JOIN LATERAL pgbus.workflow_insights_outside(win.since, win.until, s.from_hour, s.to_hour) o
    ),
    -- Class by class (each one index range): the window's span (sql/schema/0019: counts and the
    -- finished runs' durations merged), its other rolled-up hours (pgbus.workflow_insights_run_hours:
    -- counts and sorted durations), the rest live; the percentiles from those sorted lists.
    ended AS (
        SELECT c.cls, e.finished, e.cancelled, e.p
        FROM classes c
        CROSS JOIN LATERAL (
            SELECT sum(u.finished)::bigint AS finished, sum(u.cancelled)::bigint AS cancelled,
                   pgbus.insights_percentiles(array_agg(ROW(u.durations)::pgbus.insights_values), '{0.5, 0.95}') AS p
            FROM (SELECT sum(l.finished) AS finished, sum(l.cancelled) AS cancelled,
                         coalesce(array_agg(l.secs ORDER BY l.secs) FILTER (WHERE l.secs IS NOT NULL), '{}') AS durations
                  FROM live_ended l WHERE l.cls = c.cls
                  UNION ALL
                  SELECT h.finished, h.cancelled, h.durations
                  FROM outside o
                  JOIN pgbus.workflow_insights_run_hours h ON h.workflow_class = c.cls AND h.hour >= o.lo AND h.hour < o.hi
                  WHERE h.hour >= win.since AND h.hour <= win.until - interval '1 hour'
                    AND pgbus.workflow_insights_rollup_on()
                  UNION ALL
                  SELECT r.finished, r.cancelled, r.durations
                  FROM span JOIN pgbus.workflow_insights_span_runs r ON r.span_id = span.span_id
                  WHERE r.workflow_class = c.cls) u
        ) e
    )
    SELECT c.cls, d.cls IS NOT NULL,
           CASE WHEN d.cls IS NOT NULL THEN coalesce(cardinality(d.live), 0) END,
           coalesce(o.n, 0), coalesce(p.n, 0) - coalesce(l.n, 0), coalesce(p.n, 0) + coalesce(v.n, 0),
           coalesce(e.finished, 0), coalesce(e.cancelled, 0),
           round(e.p[1]::numeric, 3)::double precision, round(e.p[2]::numeric, 3)::double precision,
           coalesce(r.n, 0), coalesce(r.steps, '{}'),
           win.since, win.until
    FROM classes c
    LEFT JOIN defs d ON d.cls = c.cls
    LEFT JOIN counted o ON o.cls = c.cls
    LEFT JOIN paused p ON p.cls = c.cls
    LEFT JOIN paused_late l ON l.cls = c.cls
    LEFT JOIN overdue v ON v.cls = c.cls
    LEFT JOIN removed r ON r.cls = c.cls
    LEFT JOIN ended e ON e.cls = c.cls
    ORDER BY c.cls;
END;
$$;
