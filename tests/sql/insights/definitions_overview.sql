-- pgTAP tests for sql/functions/510_workflow_definitions_overview.sql: one row per class
-- (registered or only in the runs), ongoing / paused / stuck now, finished and cancelled in the
-- window with their p50/p95 durations, runs on removed steps, window caps, rows after as_of.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(16);
\ir ../include/insights_setup.psql

CREATE TEMP VIEW o24 AS SELECT * FROM pgbus.workflow_definitions_overview('24h', as_of => pg_temp.t()) WHERE workflow_class LIKE 'ins.%';

SELECT is((SELECT array_agg(workflow_class ORDER BY workflow_class) FROM o24),
          ARRAY['ins.Empty', 'ins.Fun', 'ins.Gone', 'ins.Rev', 'ins.Shop'],
          'every registered class and every class still in the runs, by name');
SELECT is((SELECT row(registered, step_count)::text FROM o24 WHERE workflow_class = 'ins.Gone'), row(false, NULL::int)::text,
          'a class only in the runs: not registered, no step count');
SELECT is((SELECT row(registered, step_count, ongoing, finished, duration_p50)::text FROM o24 WHERE workflow_class = 'ins.Empty'),
          row(true, 1, 0::bigint, 0::bigint, NULL::float8)::text, 'a registered class without runs: zeros, no percentile');
SELECT is((SELECT step_count FROM o24 WHERE workflow_class = 'ins.Shop'), 3, 'step count: live steps (the gravestone left out)');
-- ins.Shop now: ready1, ready2, running, paused, waiting, at "old", at "legacy" (o_future, created after T, not counted)
SELECT is((SELECT row(ongoing, paused)::text FROM o24 WHERE workflow_class = 'ins.Shop'), row(7::bigint, 1::bigint)::text,
          'ongoing 7 and paused 1 (a run created after as_of is not counted)');
SELECT is((SELECT stuck FROM o24 WHERE workflow_class = 'ins.Shop'), 1::bigint, 'stuck: pgbus.workflow_stuck''s runs of the class (the paused one)');
SELECT is((SELECT row(on_removed_steps, removed_steps)::text FROM o24 WHERE workflow_class = 'ins.Shop'),
          row(2::bigint, ARRAY['legacy', 'old'])::text, 'ongoing runs on removed steps: the gravestone and the unknown step');
SELECT is((SELECT row(on_removed_steps, removed_steps)::text FROM o24 WHERE workflow_class = 'ins.Gone'),
          row(0::bigint, '{}'::text[])::text, 'no definition: nothing counts as removed');
-- Finished in [T - 24 h, T]: 60, 120, 180, 600 s (the last ends exactly at T); the one 25 h ago
-- and the one 1 s after T are out. p50 = (120 + 180) / 2 = 150; p95 at rank 3 * 0.95 = 2.85:
-- 180 + 0.85 * (600 - 180) = 537.
SELECT is((SELECT row(finished, cancelled)::text FROM o24 WHERE workflow_class = 'ins.Shop'), row(4::bigint, 1::bigint)::text,
          'finished 4 (one ending exactly at as_of counts, one after it does not) and cancelled 1');
SELECT is((SELECT row(duration_p50, duration_p95)::text FROM o24 WHERE workflow_class = 'ins.Shop'), row(150::float8, 537::float8)::text,
          'p50 150 s, p95 537 s of the finished runs');
-- 7 days take the 25 h old one (5 s): 5, 60, 120, 180, 600 -> p50 120, p95 180 + 0.8 * 420 = 516.
SELECT is((SELECT row(finished, duration_p50, duration_p95)::text FROM pgbus.workflow_definitions_overview('7d', as_of => pg_temp.t())
           WHERE workflow_class = 'ins.Shop'), row(5::bigint, 120::float8, 516::float8)::text, '7d: five finished, p50 120, p95 516');
-- A 90-minute retention caps the 24 h window: f1 (60 s, an hour ago) and f4 (600 s, at T), and
-- the cancelled run 30 min ago. p50 = 330.
SELECT is((SELECT row(finished, cancelled, duration_p50)::text FROM pgbus.workflow_definitions_overview('24h', interval '90 minutes', pg_temp.t())
           WHERE workflow_class = 'ins.Shop'), row(2::bigint, 1::bigint, 330::float8)::text, 'capped at the retention: 2 finished, p50 330');
SELECT is((SELECT DISTINCT row(since, until)::text FROM pgbus.workflow_definitions_overview('24h', interval '90 minutes', pg_temp.t())),
          row(pg_temp.t() - interval '90 minutes', pg_temp.t() + interval '1 microsecond')::text, 'since and until: the capped window');
SELECT is((SELECT row(finished, duration_p50)::text FROM o24 WHERE workflow_class = 'ins.Gone'), row(1::bigint, 30::float8)::text,
          'a class only in the runs: its finished run and duration');
-- With as_of now (the default), every row of the fixture lies in the past except none: a run
-- created an hour from now is not counted.
SELECT pg_temp.run('nf', 'ins.Gone', 'ready', now() + interval '1 hour', NULL, 'x');
SELECT is((SELECT ongoing FROM pgbus.workflow_definitions_overview() WHERE workflow_class = 'ins.Gone'), 1::bigint,
          'default as_of now(): a run created in the future is not counted');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_definitions_overview('1w')$$, '22023', NULL, 'an unknown window raises 22023');

SELECT * FROM finish();
ROLLBACK;
