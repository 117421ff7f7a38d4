-- Workflow insights: one class's page (/workflows/definitions/<class>) and the MCP tool
-- pgbus_workflow_stats, one function per block. Window, retention and as_of: see
-- 500_workflow_insights_window.sql. Each block answers a jsonb object that repeats the window
-- ("window", "since", "until", "capped").
--
-- The blocks run with plan_cache_mode = force_generic_plan: each of their statements is planned
-- once per session, not again on every call for its arguments (planning was about half of a
-- day's page). Their plans do not depend on the arguments' values: index ranges of one class
-- and window. (pgbus.workflow_stuck's count is planned on each call for its class: EXECUTE.)

-- Whether any definition or run has this class name (the page answers 404 otherwise).
-- (PL/pgSQL, as the other helpers a page calls that the planner cannot inline: their plans are
-- kept for the session, where a LANGUAGE sql function's body is parsed and planned on each call.)
CREATE OR REPLACE FUNCTION pgbus.workflow_class_exists(workflow_class text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pgbus.workflow_definitions d WHERE d.workflow_class = $1)
        OR EXISTS (SELECT 1 FROM pgbus.workflows w WHERE w.workflow_class = $1);
END;
$$;

-- The figures of a group of attempts (attempts n, of which failed: an error was recorded;
-- reattempted: ended with reattempt; skipped), rates in percent, "few_samples" under 20
-- attempts, and p50/p95/p99 of run time (started -> ended) and pickup latency (scheduled ->
-- started) in seconds. (STABLE as jsonb_build_object is, so that the planner inlines it.)
CREATE OR REPLACE FUNCTION pgbus.workflow_step_figures(
    n bigint, failed bigint, reattempted bigint, skipped bigint,
    run_time double precision[], pickup double precision[]
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'attempts', coalesce($1, 0), 'failed', coalesce($2, 0),
        'reattempted', coalesce($3, 0), 'skipped', coalesce($4, 0),
        'failure_rate', CASE WHEN $1 > 0 THEN round(100.0 * $2 / $1, 1) END,
        'reattempt_rate', CASE WHEN $1 > 0 THEN round(100.0 * $3 / $1, 1) END,
        'skip_rate', CASE WHEN $1 > 0 THEN round(100.0 * $4 / $1, 1) END,
        'few_samples', coalesce($1, 0) < 20,
        'run_time', jsonb_build_object('p50', round($5[1]::numeric, 3), 'p95', round($5[2]::numeric, 3),
                                       'p99', round($5[3]::numeric, 3)),
        'pickup', jsonb_build_object('p50', round($6[1]::numeric, 3), 'p95', round($6[2]::numeric, 3),
                                     'p99', round($6[3]::numeric, 3)))
$$;

-- The window as the blocks repeat it, from the window they read
-- (pgbus.workflow_insights_window). (STABLE as jsonb_build_object is: inlined.)
DROP FUNCTION IF EXISTS pgbus.workflow_insights_window_json(text, interval, timestamptz);
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_window_json(
    label text, since timestamptz, until timestamptz, capped boolean, bucket text
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('window', $1, 'since', $2, 'until', $3, 'capped', $4, 'bucket', $5)
$$;

-- The figures (pgbus.workflow_step_figures' inputs) of a class's attempts that ended in
-- [since, until), per step (per_revision false) and per app revision and step (per_revision
-- true; attempts without a revision are in the per-step rows only), in one read of the attempts:
-- the span inside the window (pgbus.workflow_insights_span: one row per step and revision and
-- per step, values merged and sorted), the window's other rolled-up hours
-- (pgbus.workflow_insights_attempt_hours), the rest of the window live. Rows are grouped by
-- hashing (no sort of every value by its step's name) and the percentiles taken from the sorted
-- lists (pgbus.insights_percentiles: beside a span, only a few values around each one sorted),
-- a small group's by one sort here; a step whose attempts all ran one revision has that
-- revision's percentiles (the same values), taken once.
CREATE OR REPLACE FUNCTION pgbus.workflow_class_figures(workflow_class text, since timestamptz, until timestamptz)
RETURNS TABLE (app_revision text, step_name text, per_revision boolean, first_id bigint,
               first_seen timestamptz, last_seen timestamptz, n bigint, failed bigint,
               reattempted bigint, skipped bigint, run_time double precision[],
               pickup double precision[])
LANGUAGE sql STABLE AS $$
    WITH span AS MATERIALIZED (
        SELECT * FROM pgbus.workflow_insights_span($2, $3)
    ),
    -- per_revision NULL: a part of one step and revision (live, or an hour), read by both.
    parts AS (
        SELECT f.app_revision, f.step_name, NULL::boolean AS per_revision, min(f.step_id) AS first_id,
               min(f.seen) AS first_seen, max(f.ended_at) AS last_seen, count(*) AS n,
               count(*) FILTER (WHERE f.failed) AS failed, count(*) FILTER (WHERE f.reattempted) AS reattempted,
               count(*) FILTER (WHERE f.skipped) AS skipped,
               coalesce(array_agg(f.run_time ORDER BY f.run_time) FILTER (WHERE f.run_time IS NOT NULL), '{}') AS run_times,
               coalesce(array_agg(f.pickup ORDER BY f.pickup) FILTER (WHERE f.pickup IS NOT NULL), '{}') AS pickups
        FROM pgbus.workflow_class_live_figures($1, $2, $3) f
        GROUP BY f.app_revision, f.step_name
        UNION ALL
        SELECT h.app_revision, h.step_name, NULL, h.first_id, h.first_seen, h.last_seen, h.n, h.failed,
               h.reattempted, h.skipped, h.run_times, h.pickups
        FROM (SELECT s.from_hour, s.to_hour FROM (VALUES (1)) one(x) LEFT JOIN span s ON true) b
        CROSS JOIN LATERAL pgbus.workflow_insights_outside($2, $3, b.from_hour, b.to_hour) o
        JOIN pgbus.workflow_insights_attempt_hours h ON h.run_class = $1 AND h.hour >= o.lo AND h.hour < o.hi
        WHERE h.hour >= $2 AND h.hour <= $3 - interval '1 hour' AND pgbus.workflow_insights_rollup_on()
        UNION ALL
        SELECT a.app_revision, a.step_name, a.per_revision, a.first_id, a.first_seen, a.last_seen, a.n, a.failed,
               a.reattempted, a.skipped, a.run_times, a.pickups
        FROM span JOIN pgbus.workflow_insights_span_attempts a ON a.span_id = span.span_id
        WHERE a.run_class = $1
    ),
    -- The groups: per revision and step, and per step, their lists of values not merged.
    g AS MATERIALIZED (
        SELECT p.app_revision, p.step_name, true AS per_revision, min(p.first_id) AS first_id,
               min(p.first_seen) AS first_seen, max(p.last_seen) AS last_seen,
               sum(p.n)::bigint AS n, sum(p.failed)::bigint AS failed, sum(p.reattempted)::bigint AS reattempted,
               sum(p.skipped)::bigint AS skipped,
               array_agg(ROW(p.run_times)::pgbus.insights_values) AS run_times, sum(cardinality(p.run_times)) AS run_time_n,
               count(*) FILTER (WHERE cardinality(p.run_times) > 0) AS run_time_lists,
               array_agg(ROW(p.pickups)::pgbus.insights_values) AS pickups, sum(cardinality(p.pickups)) AS pickup_n,
               count(*) FILTER (WHERE cardinality(p.pickups) > 0) AS pickup_lists
        FROM parts p
        WHERE p.per_revision IS NOT FALSE AND p.app_revision IS NOT NULL
        GROUP BY p.app_revision, p.step_name
        UNION ALL
        SELECT NULL, p.step_name, false, min(p.first_id), min(p.first_seen), max(p.last_seen),
               sum(p.n)::bigint, sum(p.failed)::bigint, sum(p.reattempted)::bigint, sum(p.skipped)::bigint,
               array_agg(ROW(p.run_times)::pgbus.insights_values), sum(cardinality(p.run_times)),
               count(*) FILTER (WHERE cardinality(p.run_times) > 0),
               array_agg(ROW(p.pickups)::pgbus.insights_values), sum(cardinality(p.pickups)),
               count(*) FILTER (WHERE cardinality(p.pickups) > 0)
        FROM parts p
        WHERE p.per_revision IS NOT TRUE
        GROUP BY p.step_name
    ),
    -- Steps whose attempts all ran one revision (one revision's group, as many attempts as the
    -- step's): the step's values are that revision's, so are its percentiles.
    sole AS (
        SELECT r.step_name, min(r.n) AS n FROM g r WHERE r.per_revision GROUP BY r.step_name HAVING count(*) = 1
    ),
    computed AS MATERIALIZED (
        SELECT g.app_revision, g.step_name, g.per_revision, g.first_id, g.first_seen, g.last_seen,
               g.n, g.failed, g.reattempted, g.skipped,
               -- (A group of up to 2,048 values in several lists, a day's, is sorted right here, as
               -- percentile_cont sorts them: one sort per group inside this statement. Larger ones
               -- and a single list select their percentiles from the sorted lists. The answers are
               -- the same.)
               CASE WHEN g.run_time_n <= 2048 AND g.run_time_lists > 1
                    THEN (SELECT percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY u.x)
                          FROM (SELECT unnest(l.v) AS x FROM unnest(g.run_times) l) u)
                    ELSE pgbus.insights_percentiles(g.run_times, '{0.5, 0.95, 0.99}') END AS run_time,
               CASE WHEN g.pickup_n <= 2048 AND g.pickup_lists > 1
                    THEN (SELECT percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY u.x)
                          FROM (SELECT unnest(l.v) AS x FROM unnest(g.pickups) l) u)
                    ELSE pgbus.insights_percentiles(g.pickups, '{0.5, 0.95, 0.99}') END AS pickup
        FROM g LEFT JOIN sole o ON NOT g.per_revision AND o.step_name = g.step_name AND o.n = g.n
        WHERE o.step_name IS NULL
    )
    SELECT c.app_revision, c.step_name, c.per_revision, c.first_id, c.first_seen, c.last_seen,
           c.n, c.failed, c.reattempted, c.skipped, c.run_time, c.pickup
    FROM computed c
    UNION ALL
    SELECT g.app_revision, g.step_name, g.per_revision, g.first_id, g.first_seen, g.last_seen,
           g.n, g.failed, g.reattempted, g.skipped, c.run_time, c.pickup
    FROM g JOIN sole o ON o.step_name = g.step_name AND o.n = g.n
    JOIN computed c ON c.per_revision AND c.step_name = g.step_name
    WHERE NOT g.per_revision
$$;

-- The "revisions" list of pgbus.workflow_class_revisions from the per-revision rows of
-- pgbus.workflow_class_figures (as a jsonb array of those rows): the last `max_revisions`
-- revisions, newest (first seen) first, each step with its figures, "failure_rate_before" (its
-- rate in the next older revision that ran it, the one after the last listed included) and
-- "rose" (more than five points above it, compared unrounded).
CREATE OR REPLACE FUNCTION pgbus.workflow_revisions_json(workflow_class text, figures jsonb, max_revisions integer)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
    WITH f AS (
        SELECT * FROM jsonb_to_recordset($2) AS x(app_revision text, step_name text, first_id bigint,
                                                  first_seen timestamptz, last_seen timestamptz, n bigint,
                                                  failed bigint, reattempted bigint, skipped bigint,
                                                  run_time double precision[], pickup double precision[])
    ),
    ranked AS (
        SELECT f.app_revision, min(f.first_seen) AS first_seen, max(f.last_seen) AS last_seen, sum(f.n) AS n,
               row_number() OVER (ORDER BY min(f.first_seen) DESC, f.app_revision DESC) AS rank
        FROM f GROUP BY f.app_revision
    ),
    compared AS (
        SELECT f.*, r.rank,
               lead(f.failed::numeric / f.n) OVER (PARTITION BY f.step_name ORDER BY r.rank) AS before
        FROM f JOIN ranked r USING (app_revision)
        WHERE r.rank <= greatest(1, least(coalesce($3, 5), 50)) + 1
    ),
    def AS (
        SELECT x ->> 'name' AS step_name, o AS pos
        FROM pgbus.workflow_definitions d, jsonb_array_elements(d.steps) WITH ORDINALITY AS t(x, o)
        WHERE d.workflow_class = $1
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'app_revision', r.app_revision, 'first_seen', r.first_seen, 'last_seen', r.last_seen,
               'attempts', r.n,
               'steps', (SELECT jsonb_agg(jsonb_build_object('step_name', c.step_name)
                                          || pgbus.workflow_step_figures(c.n, c.failed, c.reattempted, c.skipped,
                                                                         c.run_time, c.pickup)
                                          || jsonb_build_object(
                                                 'failure_rate_before', round(100 * c.before, 1),
                                                 'rose', coalesce(100 * (c.failed::numeric / c.n - c.before) > 5, false))
                                          ORDER BY coalesce(d.pos, 1000000000), c.first_id)
                         FROM compared c LEFT JOIN def d ON d.step_name = c.step_name
                         WHERE c.app_revision = r.app_revision))
               ORDER BY r.rank), '[]')
    FROM ranked r WHERE r.rank <= greatest(1, least(coalesce($3, 5), 50)));
END;
$$;

-- The pipeline: the class's steps in order, each with the runs at it now and the figures of
-- its attempts that ended in the window. {"workflow_class", "registered", "attention" (its
-- runs pgbus.workflow_stuck names now, with the thresholds given), window...,
-- "steps": [{"step_name", "position", "removed", "in_definition", "ready", "running",
-- "waiting", "paused" (ongoing runs at the step now, created before until: list filter
-- status=<that>, workflow_class, step, created_to=until), figures (workflow_step_figures)}]}.
-- Steps: the definition's in order (a gravestone is "removed"), then any other step a run sits
-- on or an attempt in the window ran ("removed", not "in_definition"), first seen first. For a
-- class without a definition every step comes from the data and none is "removed".
-- With `max_revisions`, the answer also holds "revisions", as pgbus.workflow_class_revisions
-- gives them, from the same read of the attempts (the class page asks for both at once).
CREATE OR REPLACE FUNCTION pgbus.workflow_class_steps(
    workflow_class text,
    window_name text DEFAULT '24h',
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now(),
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days',
    max_revisions integer DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE
-- (Sorts for the percentiles stay in memory: a 30-day window of a busy class is ~100,000 rows.)
SET work_mem = '64MB' SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    win record;
    registered boolean;
    steps jsonb;
    figures jsonb;
    attention bigint;
BEGIN
    SELECT * INTO win FROM pgbus.workflow_insights_window(window_name, retention, as_of);
    registered := EXISTS (SELECT 1 FROM pgbus.workflow_definitions d
                          WHERE d.workflow_class = workflow_class_steps.workflow_class);
    -- One statement: the figures per step for the pipeline and, per revision, for the revisions.
    WITH fig AS MATERIALIZED (
        SELECT * FROM pgbus.workflow_class_figures(workflow_class_steps.workflow_class, win.since, win.until)
    ),
    att AS (
        SELECT f.* FROM fig f WHERE NOT f.per_revision
    ),
    now_ AS (
        SELECT w.current_step AS step_name, min(w.current_step_id) AS first_id,
               count(*) FILTER (WHERE w.status = 'ready') AS ready,
               count(*) FILTER (WHERE w.status = 'running') AS running,
               count(*) FILTER (WHERE w.status = 'waiting') AS waiting,
               count(*) FILTER (WHERE w.status = 'paused') AS paused
        FROM pgbus.workflows w
        WHERE w.workflow_class = workflow_class_steps.workflow_class AND w.ended_at IS NULL
          AND w.created_at < win.until AND w.current_step IS NOT NULL
        GROUP BY w.current_step
    ),
    def AS (
        SELECT x ->> 'name' AS step_name, o AS pos, coalesce((x ->> 'removed')::boolean, false) AS removed
        FROM pgbus.workflow_definitions d, jsonb_array_elements(d.steps) WITH ORDINALITY AS t(x, o)
        WHERE d.workflow_class = workflow_class_steps.workflow_class
    ),
    others AS (
        SELECT u.step_name, min(u.first_id) AS first_id
        FROM (SELECT step_name, first_id FROM att UNION ALL SELECT step_name, first_id FROM now_) u
        WHERE u.step_name NOT IN (SELECT def.step_name FROM def)
        GROUP BY u.step_name
    ),
    names AS (
        SELECT def.step_name, def.pos AS ord1, 0::bigint AS ord2, def.removed, true AS in_def FROM def
        UNION ALL
        SELECT o.step_name, 1000000000, o.first_id, registered, false FROM others o
    )
    SELECT coalesce(jsonb_agg(
               jsonb_build_object('step_name', nm.step_name,
                                  'position', row_number,
                                  'removed', nm.removed, 'in_definition', nm.in_def,
                                  'ready', coalesce(nw.ready, 0), 'running', coalesce(nw.running, 0),
                                  'waiting', coalesce(nw.waiting, 0), 'paused', coalesce(nw.paused, 0))
               || pgbus.workflow_step_figures(a.n, a.failed, a.reattempted, a.skipped, a.run_time, a.pickup)
               ORDER BY row_number), '[]'),
           CASE WHEN max_revisions IS NOT NULL
                THEN (SELECT coalesce(jsonb_agg(to_jsonb(f)), '[]') FROM fig f WHERE f.per_revision) END
    INTO steps, figures
    FROM (SELECT names.*, row_number() OVER (ORDER BY ord1, ord2, step_name) FROM names) nm
    LEFT JOIN att a ON a.step_name = nm.step_name
    LEFT JOIN now_ nw ON nw.step_name = nm.step_name;
    -- (Planned on each call for its class, as pgbus.workflow_attention is: a plan cached for any
    -- class, as a static query's is after five calls, reads every class's stuck runs.)
    EXECUTE 'SELECT count(*) FROM pgbus.workflow_stuck($1, $2, $3, $4) k WHERE k.workflow_class = $4'
    INTO attention USING stall_threshold, overdue_after, waiting_threshold, workflow_class;
    RETURN jsonb_build_object(
               'workflow_class', workflow_class, 'registered', registered, 'attention', attention)
           || pgbus.workflow_insights_window_json(win.label, win.since, win.until, win.capped, win.bucket)
           || jsonb_build_object('steps', steps)
           || CASE WHEN max_revisions IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('revisions', pgbus.workflow_revisions_json(workflow_class, figures, max_revisions)) END;
END;
$$;

-- Runs started (created), finished and cancelled per bucket of the window, in `time_zone`'s
-- wall clock (NULL: the server's TimeZone; an unknown zone raises 22023). Buckets: 5 minutes
-- (1h), hours (24h), days (7d, 30d). {window..., "time_zone", "buckets": [{"from", "to",
-- "started", "finished", "cancelled"}]}: each bucket is [from, to) clipped to the window, the
-- list filters status=all, created_from=from, created_to=to (started) and status=finished|
-- cancelled, ended_from=from, ended_to=to.
CREATE OR REPLACE FUNCTION pgbus.workflow_class_throughput(
    workflow_class text,
    window_name text DEFAULT '24h',
    time_zone text DEFAULT NULL,
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now()
) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    win record;
    tz text := coalesce(time_zone, current_setting('TimeZone'));
    buckets jsonb;
    started_cov tstzmultirange;
    ended_cov tstzmultirange;
BEGIN
    SELECT * INTO win FROM pgbus.workflow_insights_window(window_name, retention, as_of);
    PERFORM now() AT TIME ZONE tz;  -- an unknown zone raises 22023 here
    -- Whole rolled-up hours that lie within one bucket: runs started from the funnel's rollup
    -- (its ended runs by creation, and the ongoing ones live), finished and cancelled from the
    -- rollup by end; everything else live.
    started_cov := pgbus.workflow_insights_bucket_hours(win.since, win.until, win.bucket, tz, true);
    ended_cov := pgbus.workflow_insights_bucket_hours(win.since, win.until, win.bucket, tz, false);
    WITH b AS (
        SELECT * FROM pgbus.workflow_insights_buckets(win.since, win.until, win.bucket, tz)
    ),
    live AS MATERIALIZED (
        SELECT * FROM pgbus.workflow_throughput_live(workflow_class_throughput.workflow_class, win.since, win.until,
                                                     started_cov, ended_cov)
    ),
    started AS (
        SELECT u.k, sum(u.n) AS n
        FROM (SELECT pgbus.workflow_insights_bucket(l.at, win.bucket, tz) AS k, 1::bigint AS n
              FROM live l WHERE l.kind = 'started'
              UNION ALL
              SELECT pgbus.workflow_insights_bucket(f.hour, win.bucket, tz), f.finished + f.cancelled
              FROM pgbus.workflow_insights_funnel_runs f
              WHERE f.workflow_class = workflow_class_throughput.workflow_class
                AND f.hour >= lower(started_cov) AND f.hour < upper(started_cov) AND f.hour <@ started_cov) u
        GROUP BY u.k
    ),
    ended AS (
        SELECT u.k, sum(u.finished) AS finished, sum(u.cancelled) AS cancelled
        FROM (SELECT pgbus.workflow_insights_bucket(l.at, win.bucket, tz) AS k,
                     (l.status = 'finished')::int::bigint AS finished, (l.status = 'cancelled')::int::bigint AS cancelled
              FROM live l WHERE l.kind = 'ended'
              UNION ALL
              SELECT pgbus.workflow_insights_bucket(h.hour, win.bucket, tz), h.finished, h.cancelled
              FROM pgbus.workflow_insights_run_hours h
              WHERE h.workflow_class = workflow_class_throughput.workflow_class
                AND h.hour >= lower(ended_cov) AND h.hour < upper(ended_cov) AND h.hour <@ ended_cov) u
        GROUP BY u.k
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'from', b.bucket_from, 'to', b.bucket_to, 'started', coalesce(s.n, 0),
               'finished', coalesce(e.finished, 0), 'cancelled', coalesce(e.cancelled, 0))
               ORDER BY b.bucket_start), '[]')
    INTO buckets
    FROM b LEFT JOIN started s ON s.k = b.bucket_start LEFT JOIN ended e ON e.k = b.bucket_start;
    RETURN pgbus.workflow_insights_window_json(win.label, win.since, win.until, win.capped, win.bucket)
           || jsonb_build_object('workflow_class', workflow_class, 'time_zone', tz, 'buckets', buckets);
END;
$$;

-- The end-to-end durations (created -> ended) of the class's runs finished in the window:
-- {window..., "finished", "p50", "p95", "p99" (seconds), "bins": [{"label", "min_seconds",
-- "max_seconds" (NULL: no upper end), "runs"}]}, every bin listed, [min, max).
CREATE OR REPLACE FUNCTION pgbus.workflow_class_durations(
    workflow_class text,
    window_name text DEFAULT '24h',
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now()
) RETURNS jsonb
LANGUAGE plpgsql STABLE
-- (Sorts for the percentiles stay in memory: a 30-day window of a busy class is ~100,000 rows.)
SET work_mem = '64MB' SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    win record;
    answer jsonb;
BEGIN
    SELECT * INTO win FROM pgbus.workflow_insights_window(window_name, retention, as_of);
    WITH span AS MATERIALIZED (
        SELECT * FROM pgbus.workflow_insights_span(win.since, win.until)
    ),
    parts AS (
        -- The window's span (sql/schema/0019), its other rolled-up hours
        -- (pgbus.workflow_insights_run_hours), the rest live: sorted lists of durations.
        SELECT coalesce(array_agg(w.secs ORDER BY w.secs), '{}') AS durations
        FROM pgbus.workflow_insights_live_runs(workflow_class_durations.workflow_class, win.since, win.until) w
        WHERE w.status = 'finished'
        UNION ALL
        SELECT h.durations
        FROM (SELECT s.from_hour, s.to_hour FROM (VALUES (1)) one(x) LEFT JOIN span s ON true) b
        CROSS JOIN LATERAL pgbus.workflow_insights_outside(win.since, win.until, b.from_hour, b.to_hour) o
        JOIN pgbus.workflow_insights_run_hours h
          ON h.workflow_class = workflow_class_durations.workflow_class AND h.hour >= o.lo AND h.hour < o.hi
        WHERE h.hour >= win.since AND h.hour <= win.until - interval '1 hour'
          AND pgbus.workflow_insights_rollup_on()
    ),
    spanned AS (
        SELECT r.durations, r.bins FROM span JOIN pgbus.workflow_insights_span_runs r ON r.span_id = span.span_id
        WHERE r.workflow_class = workflow_class_durations.workflow_class
    ),
    d AS (
        SELECT x.secs FROM parts, unnest(parts.durations) AS x(secs)
    ),
    p AS (
        SELECT (SELECT count(*) FROM d) + coalesce((SELECT sum(cardinality(s.durations)) FROM spanned s), 0) AS n,
               pgbus.insights_percentiles(ARRAY(SELECT ROW(x.durations)::pgbus.insights_values FROM parts x
                                                UNION ALL
                                                SELECT ROW(s.durations)::pgbus.insights_values FROM spanned s),
                                          '{0.5, 0.95, 0.99}') AS q
    )
    SELECT jsonb_build_object(
        'finished', p.n,
        'p50', round(p.q[1]::numeric, 3), 'p95', round(p.q[2]::numeric, 3), 'p99', round(p.q[3]::numeric, 3),
        'bins', (SELECT jsonb_agg(jsonb_build_object(
                            'label', bins.label, 'min_seconds', bins.lo, 'max_seconds', bins.hi,
                            'runs', (SELECT count(*) FROM d WHERE d.secs >= bins.lo
                                                             AND (bins.hi IS NULL OR d.secs < bins.hi))
                                    + coalesce((SELECT sum(s.bins[bins.i]) FROM spanned s), 0))
                        ORDER BY bins.i) FROM pgbus.workflow_duration_bins() bins))
    INTO answer
    FROM p;
    RETURN pgbus.workflow_insights_window_json(win.label, win.since, win.until, win.capped, win.bucket)
           || jsonb_build_object('workflow_class', workflow_class) || answer;
END;
$$;

-- The funnel: of the class's runs started (created) in the window, how many reached each step
-- (an attempt of it was created before until) and where each one is now. {window...,
-- "started", "finished", "cancelled", "ongoing" (list filter status=all|finished|cancelled|
-- ongoing, workflow_class, created_from=since, created_to=until), "steps": [{"step_name",
-- "position", "reached", "ready", "running", "waiting", "paused" (ongoing runs at the step:
-- add step=<step_name>), "cancelled" (cancelled at the step)}]}, steps in the order of
-- pgbus.workflow_class_steps (the definition's, then others reached).
CREATE OR REPLACE FUNCTION pgbus.workflow_class_funnel(
    workflow_class text,
    window_name text DEFAULT '24h',
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now()
) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    win record;
    answer jsonb;
    covered tstzmultirange;
BEGIN
    SELECT * INTO win FROM pgbus.workflow_insights_window(window_name, retention, as_of);
    -- The hours whose ended runs are rolled up (pgbus.workflow_insights_funnel_*); every other
    -- run created in the window is read live.
    covered := pgbus.workflow_insights_funnel_covered(win.since, win.until);
    WITH runs AS MATERIALIZED (
        SELECT * FROM pgbus.workflow_funnel_live_runs(workflow_class_funnel.workflow_class, win.since, win.until, covered)
    ),
    rolled_runs AS (
        SELECT coalesce(sum(h.finished), 0)::bigint AS finished, coalesce(sum(h.cancelled), 0)::bigint AS cancelled
        FROM pgbus.workflow_insights_funnel_runs h
        WHERE h.workflow_class = workflow_class_funnel.workflow_class
          AND h.hour >= lower(covered) AND h.hour < upper(covered) AND h.hour <@ covered
    ),
    rolled_steps AS (
        SELECT h.step_name, h.reached, h.first_id, h.cancelled
        FROM pgbus.workflow_insights_funnel_steps h
        WHERE h.workflow_class = workflow_class_funnel.workflow_class
          AND h.hour >= lower(covered) AND h.hour < upper(covered) AND h.hour <@ covered
    ),
    -- A run reached a step when it has a first attempt of it (attempt 1; later ones are
    -- reattempts or resumes) that ended in the window, or that is open and its current one.
    firsts AS (
        SELECT s.workflow_id, s.step_name, s.step_id
        FROM runs r JOIN pgbus.workflow_steps s ON s.workflow_id = r.workflow_id
        WHERE s.attempt = 1 AND s.created_at < win.until
          AND ((s.run_class = workflow_class_funnel.workflow_class AND s.ended_at >= win.since)
               OR (s.ended_at IS NULL AND s.step_id = r.current_step_id))
    ),
    reached AS (
        SELECT u.step_name, sum(u.n)::bigint AS n, min(u.first_id) AS first_id
        FROM (SELECT a.step_name, count(*) AS n, min(a.step_id) AS first_id FROM firsts a GROUP BY a.step_name
              UNION ALL
              SELECT h.step_name, h.reached, h.first_id FROM rolled_steps h WHERE h.reached > 0) u
        GROUP BY u.step_name
    ),
    here AS (
        SELECT u.step_name, sum(u.ready)::bigint AS ready, sum(u.running)::bigint AS running,
               sum(u.waiting)::bigint AS waiting, sum(u.paused)::bigint AS paused,
               sum(u.cancelled)::bigint AS cancelled
        FROM (SELECT r.current_step AS step_name,
                     count(*) FILTER (WHERE r.status = 'ready') AS ready,
                     count(*) FILTER (WHERE r.status = 'running') AS running,
                     count(*) FILTER (WHERE r.status = 'waiting') AS waiting,
                     count(*) FILTER (WHERE r.status = 'paused') AS paused,
                     count(*) FILTER (WHERE r.status = 'cancelled') AS cancelled
              FROM runs r WHERE r.current_step IS NOT NULL AND r.status <> 'finished'
              GROUP BY r.current_step
              UNION ALL
              SELECT h.step_name, 0, 0, 0, 0, h.cancelled FROM rolled_steps h WHERE h.cancelled > 0) u
        GROUP BY u.step_name
    ),
    def AS (
        SELECT x ->> 'name' AS step_name, o AS pos
        FROM pgbus.workflow_definitions d, jsonb_array_elements(d.steps) WITH ORDINALITY AS t(x, o)
        WHERE d.workflow_class = workflow_class_funnel.workflow_class
    ),
    names AS (
        SELECT def.step_name, def.pos AS ord1, 0::bigint AS ord2 FROM def
        UNION ALL
        SELECT u.step_name, 1000000000, min(u.first_id)
        FROM (SELECT reached.step_name, reached.first_id FROM reached
              UNION ALL SELECT here.step_name, NULL FROM here) u
        WHERE u.step_name NOT IN (SELECT def.step_name FROM def)
        GROUP BY u.step_name
    )
    SELECT jsonb_build_object(
        'started', (SELECT count(*) FROM runs) + (SELECT finished + cancelled FROM rolled_runs),
        'finished', (SELECT count(*) FROM runs WHERE status = 'finished') + (SELECT finished FROM rolled_runs),
        'cancelled', (SELECT count(*) FROM runs WHERE status = 'cancelled') + (SELECT cancelled FROM rolled_runs),
        'ongoing', (SELECT count(*) FROM runs WHERE status NOT IN ('finished', 'cancelled')),
        'steps', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'step_name', nm.step_name, 'position', nm.row_number,
                       'reached', coalesce(rc.n, 0),
                       'ready', coalesce(h.ready, 0), 'running', coalesce(h.running, 0),
                       'waiting', coalesce(h.waiting, 0), 'paused', coalesce(h.paused, 0),
                       'cancelled', coalesce(h.cancelled, 0)) ORDER BY nm.row_number)
            FROM (SELECT names.*, row_number() OVER (ORDER BY ord1, ord2 NULLS LAST, step_name) FROM names) nm
            LEFT JOIN reached rc ON rc.step_name = nm.step_name
            LEFT JOIN here h ON h.step_name = nm.step_name), '[]'))
    INTO answer;
    RETURN pgbus.workflow_insights_window_json(win.label, win.since, win.until, win.capped, win.bucket)
           || jsonb_build_object('workflow_class', workflow_class) || answer;
END;
$$;

-- The same figures as the pipeline for the last `max_revisions` app revisions whose attempts
-- ended in the window, newest first (by first attempt started, else ended, in the window).
-- {window..., "revisions": [{"app_revision", "first_seen", "last_seen", "attempts", "steps":
-- [{"step_name", figures..., "failure_rate_before", "rose"}]}]}: "failure_rate_before" is the
-- step's failure rate in the next older revision in the window that ran it (NULL: none), and
-- "rose" is true when the failure rate rose by more than five percentage points over it
-- (compared unrounded). Attempts without a revision are left out.
CREATE OR REPLACE FUNCTION pgbus.workflow_class_revisions(
    workflow_class text,
    window_name text DEFAULT '24h',
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now(),
    max_revisions integer DEFAULT 5
) RETURNS jsonb
LANGUAGE plpgsql STABLE
-- (Sorts for the percentiles stay in memory: a 30-day window of a busy class is ~100,000 rows.)
SET work_mem = '64MB' SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    win record;
BEGIN
    SELECT * INTO win FROM pgbus.workflow_insights_window(window_name, retention, as_of);
    RETURN pgbus.workflow_insights_window_json(win.label, win.since, win.until, win.capped, win.bucket)
           || jsonb_build_object(
                  'workflow_class', workflow_class,
                  'revisions', pgbus.workflow_revisions_json(
                      workflow_class,
                      (SELECT coalesce(jsonb_agg(to_jsonb(f)), '[]')
                       FROM pgbus.workflow_class_figures(workflow_class_revisions.workflow_class, win.since, win.until) f
                       WHERE f.per_revision),
                      max_revisions));
END;
$$;

-- A class's whole page in one call (one round trip): {"steps" (with "revisions"),
-- "throughput", "durations", "funnel"}, each exactly what its own function answers; NULL when
-- no definition or run has the class name (the page answers 404).
CREATE OR REPLACE FUNCTION pgbus.workflow_class_page(
    workflow_class text,
    window_name text DEFAULT '24h',
    time_zone text DEFAULT NULL,
    retention interval DEFAULT interval '30 days',
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days',
    max_revisions integer DEFAULT 5
) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
BEGIN
    IF NOT pgbus.workflow_class_exists(workflow_class) THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object(
        'steps', pgbus.workflow_class_steps(workflow_class, window_name, retention, now(), stall_threshold,
                                            overdue_after, waiting_threshold, max_revisions),
        'throughput', pgbus.workflow_class_throughput(workflow_class, window_name, time_zone, retention),
        'durations', pgbus.workflow_class_durations(workflow_class, window_name, retention),
        'funnel', pgbus.workflow_class_funnel(workflow_class, window_name, retention));
END;
$$;
