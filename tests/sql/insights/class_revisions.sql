-- pgTAP tests for pgbus.workflow_class_revisions (sql/functions/520_workflow_class_insights.sql):
-- the last five app revisions newest first, and the five-point rule.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(9);
\ir ../include/insights_setup.psql

-- ins.Rev pay failures: r1 0/10, r2 1/10 (10 %), r3 3/20 (15 %), r4 4/19 (21.05 %), r5 0/10,
-- r6 no pay (5 ship), r7 1/10 (10 %); newest first r7 .. r3 (five).
CREATE TEMP TABLE r AS SELECT pgbus.workflow_class_revisions('ins.Rev', '24h', NULL, pg_temp.t()) AS j;
CREATE FUNCTION pg_temp.pay(rev text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT s FROM r, jsonb_array_elements(r.j -> 'revisions') v, jsonb_array_elements(v -> 'steps') s
    WHERE v ->> 'app_revision' = $1 AND s ->> 'step_name' = 'pay'
$f$;
SELECT is((SELECT jsonb_agg(v -> 'app_revision') FROM r, jsonb_array_elements(r.j -> 'revisions') v),
          '["r7", "r6", "r5", "r4", "r3"]'::jsonb, 'the last five revisions, newest first (attempts without a revision left out)');
SELECT is((SELECT jsonb_build_object('rate', s -> 'failure_rate', 'before', s -> 'failure_rate_before', 'rose', s -> 'rose') FROM pg_temp.pay('r7') s),
          '{"rate": 10.0, "before": 0.0, "rose": true}'::jsonb, 'r7: 10 % against r5''s 0 % (r6 did not run pay): rose');
SELECT is((SELECT jsonb_build_object('rate', s -> 'failure_rate', 'before', s -> 'failure_rate_before', 'rose', s -> 'rose') FROM pg_temp.pay('r5') s),
          '{"rate": 0.0, "before": 21.1, "rose": false}'::jsonb, 'r5: fell');
SELECT is((SELECT jsonb_build_object('rate', s -> 'failure_rate', 'before', s -> 'failure_rate_before', 'rose', s -> 'rose') FROM pg_temp.pay('r4') s),
          '{"rate": 21.1, "before": 15.0, "rose": true}'::jsonb, 'r4: 21.05 % against 15 %: 6.05 points, rose');
SELECT is((SELECT jsonb_build_object('rate', s -> 'failure_rate', 'before', s -> 'failure_rate_before', 'rose', s -> 'rose') FROM pg_temp.pay('r3') s),
          '{"rate": 15.0, "before": 10.0, "rose": false}'::jsonb, 'r3: exactly five points over r2 (the sixth, compared only) is not more than five');
SELECT is((SELECT jsonb_agg(jsonb_build_array(s ->> 'step_name', s -> 'failure_rate_before', s -> 'rose'))
           FROM r, jsonb_array_elements(r.j -> 'revisions') v, jsonb_array_elements(v -> 'steps') s WHERE v ->> 'app_revision' = 'r6'),
          '[["ship", null, false]]'::jsonb, 'r6: ship, with no revision before it that ran ship');
SELECT is((SELECT jsonb_build_object('a', s -> 'attempts', 'few', s -> 'few_samples', 'p50', s -> 'run_time' -> 'p50') FROM pg_temp.pay('r3') s),
          '{"a": 20, "few": false, "p50": 10.5}'::jsonb, 'r3: the pipeline''s figures (run time i s for i = 1..20: p50 10.5)');
SELECT is((SELECT jsonb_array_length(pgbus.workflow_class_revisions('ins.Rev', '24h', NULL, pg_temp.t(), 2) -> 'revisions')), 2,
          'max_revisions limits the list');

SELECT is(pgbus.workflow_class_steps('ins.Rev', '24h', NULL, pg_temp.t(), max_revisions => 5) -> 'revisions', (SELECT r.j -> 'revisions' FROM r),
          'workflow_class_steps with max_revisions answers the same revisions from the same read');

SELECT * FROM finish();
ROLLBACK;
