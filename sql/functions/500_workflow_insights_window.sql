-- Workflow insights, shared parts: the window a page reads, the attempts of one class that
-- ended in it, and the time buckets of its charts. (The list: 510; one class's blocks: 520.)
--
-- Contract for every insights function (the dashboard's two pages and the MCP tools
-- pgbus_workflow_definitions / pgbus_workflow_stats read them):
--   window_name  '1h', '24h' (default), '7d' or '30d'; anything else raises 22023.
--   retention    the window is capped at it (the workflow_retention setting; NULL: no cap).
--   as_of        the window's end (default now()); rows dated after it are not counted.
-- The window is [since, until) with until = as_of + 1 microsecond: timestamps have microsecond
-- resolution, so a row dated exactly as_of counts and a later one does not, and the Workflows
-- list's half-open filters (created_from/created_to, ended_from/ended_to) given since and
-- until select exactly the runs counted. Durations are seconds (double precision, rounded to
-- the millisecond); rates are percentages rounded to one decimal.

CREATE OR REPLACE FUNCTION pgbus.workflow_insights_window(
    window_name text DEFAULT '24h',
    retention interval DEFAULT interval '30 days',
    as_of timestamptz DEFAULT now()
) RETURNS TABLE (label text, since timestamptz, until timestamptz, capped boolean,
                 bucket text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    span interval;
BEGIN
    CASE workflow_insights_window.window_name
        WHEN '1h' THEN span := interval '1 hour'; bucket := '5 minutes';
        WHEN '24h' THEN span := interval '24 hours'; bucket := 'hour';
        WHEN '7d' THEN span := interval '168 hours'; bucket := 'day';
        WHEN '30d' THEN span := interval '720 hours'; bucket := 'day';
        ELSE RAISE EXCEPTION 'pgbus: an insights window is 1h, 24h, 7d or 30d, got %',
                             quote_nullable(workflow_insights_window.window_name)
                 USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    IF as_of IS NULL THEN
        RAISE EXCEPTION 'pgbus: an insights window needs its end (as_of)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Spans in hours, not days: timestamptz minus '1 day' would follow the session's zone.
    capped := retention IS NOT NULL AND retention > interval '0' AND retention < span;
    IF capped THEN
        span := make_interval(secs => extract(epoch FROM retention));
    END IF;
    label := workflow_insights_window.window_name;
    since := as_of - span;
    until := as_of + interval '1 microsecond';
    RETURN NEXT;
END;
$$;

-- The attempts of `workflow_class` that ended in [since, until), superseded ones left out
-- (replaced before they ran, or ended after their run had moved on): one range of
-- workflow_steps_class_ended_idx. (SQL, so it is inlined into the caller's query.)
CREATE OR REPLACE FUNCTION pgbus.workflow_class_window_attempts(
    workflow_class text, since timestamptz, until timestamptz
) RETURNS SETOF pgbus.workflow_steps
LANGUAGE sql STABLE AS $$
    SELECT s.*
    FROM pgbus.workflow_steps s
    WHERE s.run_class = $1
      AND s.ended_at >= $2 AND s.ended_at < $3
      AND s.status <> 'superseded'
$$;

-- The same attempts, narrowed to what the figures need (so sorts carry few bytes): whether an
-- error was recorded, it ended with reattempt, it was skipped; run time (started -> ended) and
-- pickup (scheduled -> started) in seconds, NULL when it never started; when it was first seen
-- (started, else ended) and its revision.
CREATE OR REPLACE FUNCTION pgbus.workflow_class_window_figures(
    workflow_class text, since timestamptz, until timestamptz
) RETURNS TABLE (step_name text, step_id bigint, failed boolean, reattempted boolean,
                 skipped boolean, run_time double precision, pickup double precision,
                 seen timestamptz, ended_at timestamptz, app_revision text)
LANGUAGE sql STABLE AS $$
    SELECT s.step_name, s.step_id, s.error IS NOT NULL, s.outcome = 'reattempt', s.status = 'skipped',
           extract(epoch FROM s.ended_at - s.started_at)::double precision,
           extract(epoch FROM greatest(s.started_at - s.scheduled_at, interval '0'))::double precision,
           coalesce(s.started_at, s.ended_at), s.ended_at, s.app_revision
    FROM pgbus.workflow_steps s
    WHERE s.run_class = $1
      AND s.ended_at >= $2 AND s.ended_at < $3
      AND s.status <> 'superseded'
$$;

-- The bucket a time falls in: 'day' and 'hour' follow the wall clock of `time_zone` (a day
-- bucket starts at local midnight on both sides of a DST change, and at its first hour on a
-- day whose midnight a DST change skips); '5 minutes' buckets are 5-minute marks.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_bucket(at timestamptz, bucket text, time_zone text)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE $2
        WHEN 'day' THEN date_trunc('day', $1, $3)
        WHEN 'hour' THEN date_trunc('hour', $1, $3)
        ELSE date_bin(interval '5 minutes', $1, timestamptz '2000-01-01 00:00:00+00')
    END
$$;

-- The buckets covering [since, until), in order: each [bucket_from, bucket_to) clipped to the
-- window, and `bucket_start` (the key pgbus.workflow_insights_bucket gives its rows).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_buckets(
    since timestamptz, until timestamptz, bucket text, time_zone text
) RETURNS TABLE (bucket_start timestamptz, bucket_from timestamptz, bucket_to timestamptz)
LANGUAGE sql STABLE AS $$
    WITH keys AS (
        -- Sampling often enough that no bucket is missed (a bucket is at least 5 minutes, an
        -- hour, or 23 hours long).
        SELECT DISTINCT pgbus.workflow_insights_bucket(g, $3, $4) AS k
        FROM generate_series($1, $2 - interval '1 microsecond', CASE $3 WHEN 'day' THEN interval '1 hour'
                                             WHEN 'hour' THEN interval '15 minutes'
                                             ELSE interval '5 minutes' END) g
        UNION
        SELECT pgbus.workflow_insights_bucket($2 - interval '1 microsecond', $3, $4)
    )
    SELECT k, greatest(k, $1), least(coalesce(lead(k) OVER (ORDER BY k), $2), $2)
    FROM keys
    ORDER BY k
$$;

-- The rollup of closed hours (pgbus.workflow_insights_rollup: sql/functions/530, tables:
-- sql/schema/0018), as the insights read it.

-- The lock that orders the rollup against writes that forget hours: the rollup takes it
-- exclusively, such a write shared (until its transaction ends), so a rollup never misses a
-- write it cannot see yet, and a write never misses an hour rolled up meanwhile.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_lock_key() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 7340213911850131207::bigint $$;

-- The hour a time falls in (UTC hours: a rolled-up hour does not depend on any time zone).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_hour(at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT date_bin(interval '1 hour', $1, timestamptz '2000-01-01 00:00:00+00') $$;

-- Whether the insights read rolled-up hours: yes, unless the setting pgbus.insights_rollup is
-- 'off' (SET pgbus.insights_rollup = off: every figure live, as a check or while rebuilding).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_rollup_on() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('pgbus.insights_rollup', true), '') NOT IN ('off', 'false', '0')
$$;

-- The rolled-up hours wholly inside [since, until), as ranges. (The helpers below that a page
-- calls and the planner cannot inline are PL/pgSQL, so that their queries' plans are kept for
-- the session: a LANGUAGE sql function's body is parsed and planned again on every call.)
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_covered(since timestamptz, until timestamptz)
RETURNS tstzmultirange
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(range_agg(tstzrange(h.hour, h.hour + interval '1 hour')), '{}'::tstzmultirange)
            FROM pgbus.workflow_insights_hours h
            WHERE pgbus.workflow_insights_rollup_on()
              AND h.hour >= $1 AND h.hour <= $2 - interval '1 hour');
END;
$$;

-- The parts of [since, until) to read live: the window less its rolled-up hours. (PL/pgSQL,
-- so that the planner takes it for the few ranges it is and reads each from its index.)
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_uncovered(since timestamptz, until timestamptz)
RETURNS TABLE (lo timestamptz, hi timestamptz)
LANGUAGE plpgsql STABLE ROWS 2 AS $$
BEGIN
    IF since < until THEN
        RETURN QUERY
        SELECT lower(r), upper(r)
        FROM unnest(tstzmultirange(tstzrange(since, until)) - pgbus.workflow_insights_covered(since, until)) r;
    END IF;
END;
$$;


-- The live parts of a window: pgbus.workflow_class_window_figures' attempts, and the runs that
-- ended (of one class, or of all when workflow_class is NULL), in [since, until) less its
-- rolled-up hours, part by part (PL/pgSQL, so that each part is one index range, whatever the
-- planner would guess for a join with the parts).
CREATE OR REPLACE FUNCTION pgbus.workflow_class_live_figures(workflow_class text, since timestamptz, until timestamptz)
RETURNS TABLE (step_name text, step_id bigint, failed boolean, reattempted boolean,
               skipped boolean, run_time double precision, pickup double precision,
               seen timestamptz, ended_at timestamptz, app_revision text)
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
DECLARE
    part record;
BEGIN
    FOR part IN SELECT * FROM pgbus.workflow_insights_uncovered(since, until) LOOP
        RETURN QUERY SELECT * FROM pgbus.workflow_class_window_figures(workflow_class, part.lo, part.hi);
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.workflow_insights_live_runs(workflow_class text, since timestamptz, until timestamptz)
RETURNS TABLE (run_class text, status text, secs double precision)
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
DECLARE
    part record;
BEGIN
    FOR part IN SELECT * FROM pgbus.workflow_insights_uncovered(since, until) LOOP
        IF workflow_class IS NULL THEN
            RETURN QUERY SELECT x.workflow_class, x.status, extract(epoch FROM x.ended_at - x.created_at)::double precision
                         FROM pgbus.workflows x WHERE x.ended_at >= part.lo AND x.ended_at < part.hi;
        ELSE
            RETURN QUERY SELECT x.workflow_class, x.status, extract(epoch FROM x.ended_at - x.created_at)::double precision
                         FROM pgbus.workflows x
                         WHERE x.workflow_class = workflow_insights_live_runs.workflow_class
                           AND x.ended_at >= part.lo AND x.ended_at < part.hi;
        END IF;
    END LOOP;
END;
$$;

-- The funnel's rolled-up hours wholly inside [since, until) whose counted attempts' times lie
-- inside it too (the live query would count every one of them).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_funnel_covered(since timestamptz, until timestamptz)
RETURNS tstzmultirange
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(range_agg(tstzrange(h.hour, h.hour + interval '1 hour')), '{}'::tstzmultirange)
            FROM pgbus.workflow_insights_funnel_hours h
            WHERE pgbus.workflow_insights_rollup_on()
              AND h.hour >= $1 AND h.hour <= $2 - interval '1 hour'
              AND (h.first_ended IS NULL OR h.first_ended >= $1)
              AND (h.last_created IS NULL OR h.last_created < $2));
END;
$$;

-- The runs of a class created in [since, until) that the funnel reads live: all of those
-- created outside `covered`, and the ongoing ones created inside it.
CREATE OR REPLACE FUNCTION pgbus.workflow_funnel_live_runs(
    workflow_class text, since timestamptz, until timestamptz, covered tstzmultirange
) RETURNS TABLE (workflow_id uuid, status text, current_step text, current_step_id bigint)
LANGUAGE plpgsql STABLE ROWS 200 AS $$
DECLARE
    part record;
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    FOR part IN SELECT lower(r) AS lo, upper(r) AS hi FROM unnest(tstzmultirange(tstzrange(since, until)) - covered) r LOOP
        RETURN QUERY SELECT w.workflow_id, w.status, w.current_step, w.current_step_id FROM pgbus.workflows w
                     WHERE w.workflow_class = workflow_funnel_live_runs.workflow_class
                       AND w.created_at >= part.lo AND w.created_at < part.hi;
    END LOOP;
    IF NOT isempty(covered) THEN
        RETURN QUERY SELECT w.workflow_id, w.status, w.current_step, w.current_step_id FROM pgbus.workflows w
                     WHERE w.workflow_class = workflow_funnel_live_runs.workflow_class AND w.ended_at IS NULL
                       AND w.created_at >= lower(covered) AND w.created_at < upper(covered)
                       AND w.created_at <@ covered;
    END IF;
END;
$$;

-- The rolled-up hours wholly inside [since, until) that lie within one bucket of `bucket` on
-- `time_zone`'s wall clock (a zone half an hour off UTC splits every hour; a 5-minute bucket
-- is shorter than an hour): by end (pgbus.workflow_insights_hours) or, `by_creation`, the
-- funnel's (pgbus.workflow_insights_funnel_hours).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_bucket_hours(
    since timestamptz, until timestamptz, bucket text, time_zone text, by_creation boolean
) RETURNS tstzmultirange
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(range_agg(tstzrange(h.hour, h.hour + interval '1 hour')), '{}'::tstzmultirange)
            FROM (SELECT e.hour FROM pgbus.workflow_insights_hours e WHERE NOT $5
                  UNION ALL
                  SELECT f.hour FROM pgbus.workflow_insights_funnel_hours f WHERE $5) h
            WHERE pgbus.workflow_insights_rollup_on()
              AND h.hour >= $1 AND h.hour <= $2 - interval '1 hour'
              AND pgbus.workflow_insights_bucket(h.hour, $3, $4)
                  = pgbus.workflow_insights_bucket(h.hour + interval '1 hour' - interval '1 microsecond', $3, $4));
END;
$$;

-- What pgbus.workflow_class_throughput reads live: runs of the class created in [since, until)
-- outside `started_covered` (kind 'started', `at` their creation), the ongoing ones created
-- inside it (those the funnel's rollup leaves out), and runs that ended in the window outside
-- `ended_covered` (kind 'ended', `at` their end).
CREATE OR REPLACE FUNCTION pgbus.workflow_throughput_live(
    workflow_class text, since timestamptz, until timestamptz,
    started_covered tstzmultirange, ended_covered tstzmultirange
) RETURNS TABLE (kind text, at timestamptz, status text)
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
DECLARE
    part record;
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    FOR part IN SELECT lower(r) AS lo, upper(r) AS hi FROM unnest(tstzmultirange(tstzrange(since, until)) - started_covered) r LOOP
        RETURN QUERY SELECT 'started', w.created_at, w.status FROM pgbus.workflows w
                     WHERE w.workflow_class = workflow_throughput_live.workflow_class
                       AND w.created_at >= part.lo AND w.created_at < part.hi;
    END LOOP;
    IF NOT isempty(started_covered) THEN
        RETURN QUERY SELECT 'started', w.created_at, w.status FROM pgbus.workflows w
                     WHERE w.workflow_class = workflow_throughput_live.workflow_class AND w.ended_at IS NULL
                       AND w.created_at >= lower(started_covered) AND w.created_at < upper(started_covered)
                       AND w.created_at <@ started_covered;
    END IF;
    FOR part IN SELECT lower(r) AS lo, upper(r) AS hi FROM unnest(tstzmultirange(tstzrange(since, until)) - ended_covered) r LOOP
        RETURN QUERY SELECT 'ended', w.ended_at, w.status FROM pgbus.workflows w
                     WHERE w.workflow_class = workflow_throughput_live.workflow_class
                       AND w.ended_at >= part.lo AND w.ended_at < part.hi;
    END LOOP;
END;
$$;

-- Exact percentiles (percentile_cont's answers, to the last bit) of values kept as sorted lists:
-- the insights' rolled-up hours and spans store their run times, pickups and durations sorted
-- (sql/schema/0018, 0019), so a window's figures need not unnest and sort them again.
--
-- percentile_cont(p) over n values (PostgreSQL's orderedsetaggs.c): with pos = p * (n - 1) in
-- double precision, lo the floor(pos)-th and hi the ceil(pos)-th value (0-based) in ascending
-- order, it answers lo + (pos - floor(pos)) * (hi - lo), and NULL over no values. The functions
-- below compute exactly that. The values are finite (no NaN, no NULL: the rollup leaves NULLs
-- out).

-- percentile_cont(fractions) of one sorted array, by position (NULL for no values). (PL/pgSQL
-- expressions, no query: called for every step of a page.)
CREATE OR REPLACE FUNCTION pgbus.insights_sorted_percentiles(sorted double precision[], fractions double precision[])
RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    n integer := cardinality(sorted);
    f double precision;
    pos double precision;
    lo integer;
    prop double precision;
    answer double precision[] := '{}';
BEGIN
    IF n IS NULL OR n = 0 THEN
        RETURN NULL;
    ELSIF fractions IS NULL THEN
        RETURN answer;
    END IF;
    FOREACH f IN ARRAY fractions LOOP
        pos := f * (n - 1)::double precision;
        lo := 1 + floor(pos)::integer;
        prop := pos - floor(pos);
        IF prop = 0 THEN
            answer := answer || sorted[lo];
        ELSE
            answer := answer || (sorted[lo] + (prop * (sorted[1 + ceil(pos)::integer] - sorted[lo])));
        END IF;
    END LOOP;
    RETURN answer;
END;
$$;

-- The k-th smallest value (1-based, 1 <= k <= both lengths together) of two sorted arrays
-- together, by bisection: the smallest count i of a's values among the k smallest for which
-- b's (k - i)-th value is not after a's (i + 1)-th (a count that only grows true as i grows);
-- the k-th is then the larger of a's i-th and b's (k - i)-th (an index 0 reads NULL, which
-- greatest leaves out). About log2(k) element reads, no query, nothing sorted.
CREATE OR REPLACE FUNCTION pgbus.insights_kth(a double precision[], b double precision[], k bigint)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    lo bigint := greatest(0, k - coalesce(cardinality(b), 0));
    hi bigint := least(k, coalesce(cardinality(a), 0));
    mid bigint;
BEGIN
    WHILE lo < hi LOOP
        mid := (lo + hi) / 2;
        IF b[k - mid] <= a[mid + 1] THEN
            hi := mid;
        ELSE
            lo := mid + 1;
        END IF;
    END LOOP;
    RETURN greatest(a[lo], b[k - lo]);
END;
$$;

-- percentile_cont(fractions) of every value of the lists, each list sorted ascending. One list:
-- by position. Otherwise the longest list stays as it is, the others are merged into one sorted
-- array (pgbus.insights_merge: only their values are sorted, usually a few beside a window's
-- span), and each order statistic percentile_cont reads is found in the two by bisection
-- (pgbus.insights_kth).
CREATE OR REPLACE FUNCTION pgbus.insights_percentiles(lists pgbus.insights_values[], fractions double precision[])
RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    longest integer;
    size bigint;
    most bigint := -1;
    big double precision[];
    others double precision[];
    n bigint := 0;
    f double precision;
    pos double precision;
    lo double precision;
    answer double precision[] := '{}';
BEGIN
    IF cardinality(lists) = 1 THEN
        RETURN pgbus.insights_sorted_percentiles(coalesce((lists[1]).v, '{}'), fractions);
    END IF;
    -- The longest list (the first of the longest) and how many values in all, without a query.
    FOR i IN 1 .. coalesce(cardinality(lists), 0) LOOP
        size := coalesce(cardinality((lists[i]).v), 0);
        n := n + size;
        IF size > most THEN
            most := size;
            longest := i;
        END IF;
    END LOOP;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    big := (lists[longest]).v;
    IF n = most THEN
        RETURN pgbus.insights_sorted_percentiles(big, fractions);
    ELSIF fractions IS NULL THEN
        RETURN answer;
    END IF;
    others := pgbus.insights_merge(lists[:longest - 1] || lists[longest + 1:]);
    FOREACH f IN ARRAY fractions LOOP
        pos := f * (n - 1)::double precision;
        lo := pgbus.insights_kth(big, others, 1 + floor(pos)::bigint);
        IF pos = floor(pos) THEN
            answer := answer || lo;
        ELSE
            answer := answer || (lo + ((pos - floor(pos))
                                       * (pgbus.insights_kth(big, others, 1 + ceil(pos)::bigint) - lo)));
        END IF;
    END LOOP;
    RETURN answer;
END;
$$;

-- The values of the lists merged into one sorted array (one list is returned as it is).
-- (PL/pgSQL: a SQL function with a subquery is never inlined, and would be planned again on
-- each call of pgbus.insights_percentiles.)
CREATE OR REPLACE FUNCTION pgbus.insights_merge(lists pgbus.insights_values[])
RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF cardinality(lists) = 1 THEN
        RETURN coalesce((lists[1]).v, '{}');
    END IF;
    RETURN (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM unnest(lists) l, unnest(l.v) x);
END;
$$;

-- The bins of the end-to-end duration chart (pgbus.workflow_class_durations), [lo, hi) in
-- seconds (hi NULL: no upper end).
CREATE OR REPLACE FUNCTION pgbus.workflow_duration_bins()
RETURNS TABLE (i integer, label text, lo integer, hi integer)
LANGUAGE sql IMMUTABLE AS $$
    VALUES (1, '< 1 s', 0, 1), (2, '1–10 s', 1, 10), (3, '10 s–1 min', 10, 60),
           (4, '1–10 min', 60, 600), (5, '10 min–1 h', 600, 3600), (6, '1–6 h', 3600, 21600),
           (7, '6–24 h', 21600, 86400), (8, '1–7 d', 86400, 604800), (9, '≥ 7 d', 604800, NULL)
$$;

-- Whether a span (sql/schema/0019) still holds what its hours hold: every hour of it rolled up,
-- none since it was built (a forgotten hour is deleted; one rolled up again has a higher number).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_span_valid(s pgbus.workflow_insights_spans)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*) = extract(epoch FROM s.to_hour - s.from_hour) / 3600
            FROM pgbus.workflow_insights_hours h
            WHERE h.hour >= s.from_hour AND h.hour < s.to_hour AND coalesce(h.rolled_seq, 0) < s.built_seq);
END;
$$;

-- The span a window [since, until) reads: the longest valid one wholly inside it (none when the
-- rollup is off or no span fits). Read in the same statement as the span's rows and the
-- window's other hours (one snapshot).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_span(since timestamptz, until timestamptz)
RETURNS TABLE (span_id bigint, from_hour timestamptz, to_hour timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.span_id, s.from_hour, s.to_hour
    FROM pgbus.workflow_insights_spans s
    WHERE pgbus.workflow_insights_rollup_on() AND s.from_hour >= $1 AND s.to_hour <= $2
      AND pgbus.workflow_insights_span_valid(s)
    ORDER BY s.to_hour - s.from_hour DESC, s.to_hour DESC
    LIMIT 1
$$;

-- The parts of [since, until) outside a window's span [span_from, span_to) (NULLs: it has none),
-- as ranges [lo, hi), so that the window's other hours are read range by range (one index range
-- each, not every hour of the window).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_outside(
    since timestamptz, until timestamptz, span_from timestamptz, span_to timestamptz
) RETURNS TABLE (lo timestamptz, hi timestamptz)
LANGUAGE sql IMMUTABLE AS $$
    SELECT $1, coalesce($3, $2)
    UNION ALL
    SELECT $4, $2 WHERE $4 IS NOT NULL
$$;
