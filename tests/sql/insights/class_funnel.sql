-- pgTAP tests for pgbus.workflow_class_funnel (sql/functions/520_workflow_class_insights.sql):
-- of the runs started in the window, how many reached each step and where each one is now.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/insights_setup.psql

-- ins.Fun: r1..r6 and r9 started in [T - 24 h, T]; r7 before it, r8 after T.
CREATE TEMP TABLE f AS SELECT pgbus.workflow_class_funnel('ins.Fun', '24h', NULL, pg_temp.t()) AS j;
SELECT is((SELECT jsonb_build_object('s', j -> 'started', 'f', j -> 'finished', 'c', j -> 'cancelled', 'o', j -> 'ongoing') FROM f),
          '{"s": 7, "f": 2, "c": 1, "o": 4}'::jsonb, 'started 7: finished 2 (r1, r2), cancelled 1 (r5), ongoing 4 (r3, r4, r6, r9)');
-- reached a: r1..r6 (r2's two attempts count once; r9's attempt is dated after T); b: r1, r2, r3, r4, r6; c: r1, r2, r6.
SELECT is((SELECT jsonb_agg(jsonb_build_array(s ->> 'step_name', s -> 'reached') ORDER BY (s ->> 'position')::int) FROM f, jsonb_array_elements(f.j -> 'steps') s),
          '[["a", 6], ["b", 5], ["c", 3]]'::jsonb, 'reached: 6, 5, 3, in the definition''s order');
SELECT is((SELECT s - ARRAY['step_name', 'position', 'reached'] FROM f, jsonb_array_elements(f.j -> 'steps') s WHERE s ->> 'step_name' = 'a'),
          '{"ready": 1, "running": 0, "waiting": 0, "paused": 0, "cancelled": 1}'::jsonb, 'now at a: r9 ready, r5 cancelled there');
SELECT is((SELECT s - ARRAY['step_name', 'position', 'reached'] FROM f, jsonb_array_elements(f.j -> 'steps') s WHERE s ->> 'step_name' = 'b'),
          '{"ready": 1, "running": 0, "waiting": 0, "paused": 1, "cancelled": 0}'::jsonb, 'now at b: r3 ready, r4 paused');
SELECT is((SELECT s - ARRAY['step_name', 'position', 'reached'] FROM f, jsonb_array_elements(f.j -> 'steps') s WHERE s ->> 'step_name' = 'c'),
          '{"ready": 0, "running": 1, "waiting": 0, "paused": 0, "cancelled": 0}'::jsonb, 'now at c: r6 running (finished runs are only counted as finished)');
-- 7 days take r7 too (created 30 h before T, finished).
SELECT is((SELECT jsonb_build_object('s', j -> 'started', 'f', j -> 'finished') FROM (SELECT pgbus.workflow_class_funnel('ins.Fun', '7d', NULL, pg_temp.t()) AS j) x),
          '{"s": 8, "f": 3}'::jsonb, '7d: r7 counts');

SELECT * FROM finish();
ROLLBACK;
