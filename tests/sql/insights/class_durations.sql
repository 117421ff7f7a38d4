-- pgTAP tests for pgbus.workflow_class_durations (sql/functions/520_workflow_class_insights.sql):
-- the end-to-end durations of the runs finished in the window, percentiles and bins.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/insights_setup.psql

-- ins.Shop finished in [T - 24 h, T]: 60, 120, 180, 600 s. p50 150, p95 537, p99 180 + 0.97 * 420 = 587.4.
CREATE TEMP TABLE d AS SELECT pgbus.workflow_class_durations('ins.Shop', '24h', NULL, pg_temp.t()) AS j;
SELECT is((SELECT j ->> 'finished' FROM d), '4', 'finished in the window: 4 (the cancelled run and the one after as_of left out)');
SELECT is((SELECT jsonb_build_object('p50', j -> 'p50', 'p95', j -> 'p95', 'p99', j -> 'p99') FROM d),
          '{"p50": 150, "p95": 537, "p99": 587.4}'::jsonb, 'p50 / p95 / p99 in seconds');
SELECT is((SELECT jsonb_object_agg(b ->> 'label', b -> 'runs') FROM d, jsonb_array_elements(d.j -> 'bins') b WHERE (b ->> 'runs')::int > 0),
          '{"1–10 min": 3, "10 min–1 h": 1}'::jsonb, 'bins are [min, max): 60 s falls in 1–10 min, 600 s in 10 min–1 h');
SELECT is((SELECT jsonb_array_length(j -> 'bins') FROM d), 9, 'every bin is listed, empty ones too');
-- 7 days add the 5 s run.
SELECT is((SELECT b -> 'runs' FROM jsonb_array_elements(pgbus.workflow_class_durations('ins.Shop', '7d', NULL, pg_temp.t()) -> 'bins') b
           WHERE b ->> 'label' = '1–10 s'), '1'::jsonb, '7d: the 5 s run from 25 h ago');
SELECT is((SELECT jsonb_build_object('n', j -> 'finished', 'p50', j -> 'p50') FROM (SELECT pgbus.workflow_class_durations('ins.Empty', '24h', NULL, pg_temp.t()) AS j) x),
          '{"n": 0, "p50": null}'::jsonb, 'no finished runs: 0, no percentile');

SELECT * FROM finish();
ROLLBACK;
