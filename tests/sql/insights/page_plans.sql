-- pgTAP tests for how a class's insights page is computed (sql/functions/500 and 520), beside
-- its answers (class_*.sql): the helpers a page calls many times keep their plans for the
-- session (PL/pgSQL, or LANGUAGE sql that the planner inlines), the blocks' statements are
-- planned once, and the percentiles of a group of a few lists, sorted inside the figures
-- statement, are percentile_cont's over the group's attempts, as the larger groups' are, and a
-- step whose attempts all ran one revision has that revision's.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(8);
\ir ../include/insights_setup.psql
-- ins.One, beside the fixture: step x's 30 attempts all in revision v1, one every 25 minutes
-- up to T (pickup k/2 s, run time 3k s); step y's in v1 and v2; step z's in v1 and one without
-- a revision.
\o /dev/null
SELECT pg_temp.run('one', 'ins.One', 'ready', pg_temp.t() - interval '20 hours', NULL, 'x');
SELECT pg_temp.att('one', s.s, 'completed', 'complete', pg_temp.t() - k * interval '25 minutes',
                   pg_temp.t() - k * interval '25 minutes' + k * interval '0.5 seconds',
                   pg_temp.t() - k * interval '25 minutes' + k * interval '3.5 seconds', false,
                   CASE WHEN s.s = 'y' AND k % 2 = 0 THEN 'v2' WHEN s.s = 'z' AND k = 7 THEN NULL ELSE 'v1' END)
FROM generate_series(1, 30) k, (VALUES ('x'), ('y'), ('z')) s(s);
\o

SELECT is((SELECT array_agg(p.proname::text ORDER BY p.proname)
           FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
           WHERE p.pronamespace = 'pgbus'::regnamespace AND l.lanname <> 'plpgsql'
             AND p.proname IN ('workflow_class_exists', 'workflow_revisions_json',
                               'insights_sorted_percentiles', 'insights_kth', 'insights_merge', 'insights_percentiles', 'workflow_insights_covered',
                               'workflow_insights_funnel_covered', 'workflow_insights_bucket_hours',
                               'workflow_insights_span_valid')),
          NULL, 'the helpers a page calls that the planner cannot inline are PL/pgSQL (plans kept for the session)');
SELECT is((SELECT array_agg(l.lanname || ' ' || p.provolatile::text ORDER BY p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
           WHERE p.oid IN ('pgbus.workflow_step_figures(bigint, bigint, bigint, bigint, double precision[], double precision[])'::regprocedure,
                           'pgbus.workflow_insights_window_json(text, timestamptz, timestamptz, boolean, text)'::regprocedure)),
          ARRAY['sql s', 'sql s'],
          'pgbus.workflow_step_figures and workflow_insights_window_json are LANGUAGE sql and STABLE, as their jsonb_build_object is: the planner inlines them');
SELECT is((SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
           WHERE p.pronamespace = 'pgbus'::regnamespace
             AND p.proname IN ('workflow_class_steps', 'workflow_class_throughput', 'workflow_class_durations',
                               'workflow_class_funnel', 'workflow_class_revisions')
             AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig)),
          ARRAY['workflow_class_durations', 'workflow_class_funnel', 'workflow_class_revisions', 'workflow_class_steps',
                'workflow_class_throughput'],
          'every block of the page plans its statements once per session');
SELECT is((SELECT count(*)::int FROM pg_proc p
           WHERE p.pronamespace = 'pgbus'::regnamespace AND p.proname = 'workflow_funnel_live_runs'
             AND p.prosrc ILIKE '%EXECUTE%'),
          0, 'the funnel''s live runs are static queries (plans kept), not EXECUTE');

-- The figures per step and per revision and step, as pgbus.workflow_class_figures gives them,
-- against percentile_cont over the same attempts read directly (the definition), in every
-- window, with the rollup and its spans (a group's values in a span, hours and live ends) and
-- without (one list).
CREATE FUNCTION pg_temp.direct(cls text, since timestamptz, until timestamptz) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.per_revision, x.step_name, x.app_revision), '[]')
    FROM (SELECT f.app_revision, f.step_name, true AS per_revision, count(*) AS n,
                 percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY f.run_time) AS run_time,
                 percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY f.pickup) AS pickup
          FROM pgbus.workflow_class_window_figures(cls, since, until) f
          WHERE f.app_revision IS NOT NULL
          GROUP BY f.app_revision, f.step_name
          UNION ALL
          SELECT NULL, f.step_name, false, count(*),
                 percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY f.run_time),
                 percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY f.pickup)
          FROM pgbus.workflow_class_window_figures(cls, since, until) f
          GROUP BY f.step_name) x
$f$;
CREATE FUNCTION pg_temp.figures(cls text, since timestamptz, until timestamptz) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT coalesce(jsonb_agg(jsonb_build_object('app_revision', f.app_revision, 'step_name', f.step_name,
                                                 'per_revision', f.per_revision, 'n', f.n, 'run_time', f.run_time,
                                                 'pickup', f.pickup)
                              ORDER BY f.per_revision, f.step_name, f.app_revision), '[]')
    FROM pgbus.workflow_class_figures(cls, since, until) f
$f$;
-- Each class, window and moment whose figures differ from the direct ones.
CREATE FUNCTION pg_temp.differing() RETURNS text[] LANGUAGE sql AS $f$
    SELECT coalesce(array_agg(c.c || ' ' || w.w || ' ' || m.m ORDER BY c.c, w.w, m.m), '{}')
    FROM unnest(ARRAY['ins.Shop', 'ins.Gone', 'ins.Empty', 'ins.Fun', 'ins.Rev', 'ins.One']) c(c),
         unnest(ARRAY['1h', '24h', '7d', '30d']) w(w),
         unnest(ARRAY[interval '0', interval '37 minutes 12.5 seconds', interval '1 hour 59 minutes']) m(m),
         pgbus.workflow_insights_window(w.w, NULL, pg_temp.t() + m.m) win
    WHERE pg_temp.figures(c.c, win.since, win.until) IS DISTINCT FROM pg_temp.direct(c.c, win.since, win.until)
$f$;

SELECT is((SELECT jsonb_agg(jsonb_build_array(f.step_name, f.app_revision, f.n, f.run_time, f.pickup) ORDER BY f.step_name, f.app_revision)
           FROM pgbus.workflow_class_figures('ins.One', pg_temp.t() - interval '24 hours', pg_temp.t() + interval '1 microsecond') f
           WHERE f.step_name = 'x'),
          '[["x", "v1", 30, [46.5, 85.64999999999999, 89.13], [7.75, 14.274999999999999, 14.855]],
            ["x", null, 30, [46.5, 85.64999999999999, 89.13], [7.75, 14.274999999999999, 14.855]]]'::jsonb,
          'ins.One''s step x, all of it in v1: the same figures per step as for v1 (run time 3k s, pickup k/2 s, k = 1..30)');
SELECT is(pg_temp.differing(), '{}', 'read live: every group''s percentiles are percentile_cont''s over its attempts');
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') > 0
          AND pgbus.workflow_insights_build_spans(pg_temp.t()) = 3, 'rolled up from 32 days before T, spans built');
SELECT is(pg_temp.differing(), '{}', 'with the rollup and its spans: the same percentiles, from sorted lists');

SELECT * FROM finish();
ROLLBACK;
