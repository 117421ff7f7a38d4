-- pgTAP tests for sql/functions/520_workflow_class_insights.sql: pgbus.workflow_class_steps
-- (the pipeline: steps in order, runs at each now, percentiles, rates, few samples) and
-- pgbus.workflow_class_exists.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(23);
\ir ../include/insights_setup.psql

CREATE TEMP TABLE p AS SELECT pgbus.workflow_class_steps('ins.Shop', '24h', NULL, pg_temp.t()) AS j;
CREATE FUNCTION pg_temp.step(name text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT s FROM p, jsonb_array_elements(p.j -> 'steps') s WHERE s ->> 'step_name' = $1
$f$;

SELECT ok(pgbus.workflow_class_exists('ins.Shop') AND pgbus.workflow_class_exists('ins.Gone') AND pgbus.workflow_class_exists('ins.Empty'),
          'exists: a registered class, a class only in the runs, a class without runs');
SELECT ok(NOT pgbus.workflow_class_exists('ins.Nope'), 'exists: a name no class or run has');
SELECT is((SELECT array_agg(s ->> 'step_name' ORDER BY (s ->> 'position')::int) FROM p, jsonb_array_elements(p.j -> 'steps') s),
          ARRAY['charge', 'ship', 'notify', 'old', 'legacy'], 'steps in the definition''s order, then a step only the runs know');
SELECT is((SELECT array_agg((s ->> 'removed') || '/' || (s ->> 'in_definition') ORDER BY (s ->> 'position')::int) FROM p, jsonb_array_elements(p.j -> 'steps') s),
          ARRAY['false/true', 'false/true', 'false/true', 'true/true', 'true/false'], 'the gravestone and the unknown step are removed');
SELECT is((SELECT p.j ->> 'registered' FROM p), 'true', 'registered');
SELECT is((SELECT p.j ->> 'attention' FROM p), '1', 'attention: the class''s stuck runs now (the paused one)');
-- An attempt written by pgbus.workflow_schedule_step carries its run's class.
SELECT pgbus.workflow_register('ins.Real', '[{"name": "one"}]', 'd1', 'ins_real');
CREATE TEMP TABLE real_run AS SELECT workflow_id FROM pgbus.workflow_start('ins.Real', NULL, NULL, actor => 't');
SELECT is((SELECT s.run_class FROM pgbus.workflow_steps s WHERE s.workflow_id = (SELECT workflow_id FROM real_run)),
          'ins.Real', 'a scheduled attempt carries its run''s class (run_class)');
-- Runs at each step now (created before until).
SELECT is((pg_temp.step('ship') ->> 'ready')::int, 2, 'ship: 2 ready now (the run created after as_of is not counted)');
SELECT is((pg_temp.step('ship') ->> 'running')::int, 1, 'ship: 1 running');
SELECT is((pg_temp.step('charge') ->> 'paused')::int, 1, 'charge: 1 paused');
SELECT is((pg_temp.step('notify') ->> 'waiting')::int, 1, 'notify: 1 waiting');
SELECT is((pg_temp.step('legacy') ->> 'ready')::int, 1, 'legacy: 1 ready');
-- charge: run 1, 2, 3, 10 s -> p50 2.5, p95 3 + 0.85 * 7 = 8.95, p99 3 + 0.97 * 7 = 9.79;
-- pickup 0, 1, 1, 4 s -> p50 1, p95 1 + 0.85 * 3 = 3.55, p99 3.91.
SELECT is(pg_temp.step('charge') -> 'run_time', '{"p50": 2.5, "p95": 8.95, "p99": 9.79}'::jsonb, 'charge: run time p50/p95/p99');
SELECT is(pg_temp.step('charge') -> 'pickup', '{"p50": 1, "p95": 3.55, "p99": 3.91}'::jsonb, 'charge: pickup latency p50/p95/p99');
SELECT is((SELECT jsonb_build_object('a', s -> 'attempts', 'f', s -> 'failure_rate', 'r', s -> 'reattempt_rate', 's', s -> 'skip_rate')
           FROM pg_temp.step('charge') s), '{"a": 4, "f": 25.0, "r": 25.0, "s": 0.0}'::jsonb,
          'charge: 4 attempts in the window (one after as_of, a superseded one and an older one left out), 25 % failed and reattempted');
SELECT is(pg_temp.step('charge') -> 'few_samples', 'true', 'charge: few samples (4 < 20)');
-- ship: 20 attempts, run 1..20 s -> p50 10.5, p95 19 + 0.05 = 19.05, p99 19.81; 1 failed, 3 skipped.
SELECT is(pg_temp.step('ship') -> 'run_time', '{"p50": 10.5, "p95": 19.05, "p99": 19.81}'::jsonb, 'ship: run time p50/p95/p99');
SELECT is((SELECT jsonb_build_object('a', s -> 'attempts', 'f', s -> 'failure_rate', 'r', s -> 'reattempt_rate', 's', s -> 'skip_rate')
           FROM pg_temp.step('ship') s), '{"a": 20, "f": 5.0, "r": 0.0, "s": 15.0}'::jsonb, 'ship: 5 % failed, 15 % skipped');
SELECT is(pg_temp.step('ship') -> 'few_samples', 'false', 'ship: 20 attempts are not few');
SELECT is(pg_temp.step('notify') - ARRAY['step_name', 'position', 'removed', 'in_definition', 'ready', 'running', 'waiting', 'paused'],
          '{"attempts": 0, "failed": 0, "reattempted": 0, "skipped": 0, "failure_rate": null, "reattempt_rate": null, "skip_rate": null,
            "few_samples": true, "run_time": {"p50": null, "p95": null, "p99": null}, "pickup": {"p50": null, "p95": null, "p99": null}}'::jsonb,
          'a step without attempts: no rates, no percentiles, few samples');
-- A 7-day window takes the attempt 29 h old (run 0 s, pickup 0 s): 0, 1, 2, 3, 10 -> p50 2.
SELECT is((SELECT (s -> 'run_time' ->> 'p50')::numeric FROM jsonb_array_elements(pgbus.workflow_class_steps('ins.Shop', '7d', NULL, pg_temp.t()) -> 'steps') s
           WHERE s ->> 'step_name' = 'charge'), 2::numeric, '7d: the older attempt counts');
-- A class without a definition: its steps come from the data, none removed.
SELECT is((SELECT jsonb_agg(jsonb_build_array(s ->> 'step_name', s -> 'removed', s -> 'ready'))
           FROM jsonb_array_elements(pgbus.workflow_class_steps('ins.Gone', '24h', NULL, pg_temp.t()) -> 'steps') s),
          '[["x", false, 1]]'::jsonb, 'a class without a definition: steps from its runs');
SELECT throws_ok($$SELECT pgbus.workflow_class_steps('ins.Shop', '3d')$$, '22023', NULL, 'an unknown window raises 22023');

SELECT * FROM finish();
ROLLBACK;
