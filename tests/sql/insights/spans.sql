-- pgTAP tests for the insights' spans (sql/schema/0019, pgbus.workflow_insights_build_spans and
-- the trigger in sql/functions/530): with the fixed data rolled up and spans of 24 h, 7 d and
-- 30 d built, every insights function answers exactly what it answers live; the answers do come
-- from the spans; forgetting an hour forgets the spans holding it; a span is built only when
-- every one of its hours is rolled up.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(17);
\ir ../include/insights_setup.psql

\ir ../include/insights_answers.psql

CREATE FUNCTION pg_temp.same(at timestamptz) RETURNS boolean LANGUAGE sql AS $f$
    SELECT pg_temp.answers(at) = pg_temp.live(at)
$f$;
-- Which span a window as of `at` reads (its length in hours; NULL: none).
CREATE FUNCTION pg_temp.span_hours(w interval, at timestamptz) RETURNS integer LANGUAGE sql AS $f$
    SELECT (extract(epoch FROM s.to_hour - s.from_hour) / 3600)::int
    FROM pgbus.workflow_insights_span(at - w, at + interval '1 microsecond') s
$f$;

SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') > 0, 'rolled up from 32 days before T');
-- Spans ending at T (the rollup builds them at the newest closed hour; here, at T).
SELECT is(pgbus.workflow_insights_build_spans(pg_temp.t()), 3, 'three spans built, ending at T');
SELECT is(pgbus.workflow_insights_build_spans(pg_temp.t()), 0, 'building them again does nothing');
SELECT is((SELECT array_agg((extract(epoch FROM to_hour - from_hour) / 3600)::int ORDER BY from_hour DESC) FROM pgbus.workflow_insights_spans WHERE to_hour = pg_temp.t()),
          ARRAY[22, 162, 708], 'of 22, 162 and 708 hours: the windows of 24 h, 7 d and 30 d ending up to 2, 6 and 12 hours after T hold them');
SELECT is(ARRAY[pg_temp.span_hours(interval '24 hours', pg_temp.t()), pg_temp.span_hours(interval '168 hours', pg_temp.t() + interval '1 hour 59 minutes'),
                pg_temp.span_hours(interval '720 hours', pg_temp.t() + interval '37 minutes'), pg_temp.span_hours(interval '720 hours', pg_temp.t() + interval '12 hours'),
                pg_temp.span_hours(interval '1 hour', pg_temp.t()),
                pg_temp.span_hours(interval '24 hours', pg_temp.t() + interval '2 hours 1 minute')],
          ARRAY[22, 162, 708, 708, NULL, NULL], 'each window reads the longest span inside it (none for 1 h, none once the span''s first hour left the window)');
SELECT is((SELECT jsonb_build_array(finished, cancelled, durations, bins) FROM pgbus.workflow_insights_span_runs r
           JOIN pgbus.workflow_insights_spans s USING (span_id) WHERE s.to_hour = pg_temp.t() AND s.to_hour - s.from_hour = interval '22 hours' AND r.workflow_class = 'ins.Shop'),
          '[3, 1, [60, 120, 180], [0, 0, 0, 3, 0, 0, 0, 0, 0]]'::jsonb,
          'the 24 h span of ins.Shop: three finished (60, 120, 180 s: the 1-10 min bin), one cancelled (the run ending at T is not in it)');
SELECT is((SELECT jsonb_build_array(n, run_times) FROM pgbus.workflow_insights_span_attempts a JOIN pgbus.workflow_insights_spans s USING (span_id)
           WHERE s.to_hour = pg_temp.t() AND s.to_hour - s.from_hour = interval '22 hours' AND a.run_class = 'ins.Shop' AND a.step_name = 'ship' AND NOT a.per_revision),
          jsonb_build_array(20, (SELECT array_agg(i::double precision ORDER BY i) FROM generate_series(1, 20) i)),
          'ship''s 20 attempts in the 24 h span, their run times merged and sorted');

-- The answers with the spans are the live ones: at T, with ragged ends, at the spans' last moment.
SELECT ok(pg_temp.same(pg_temp.t()), 'at T: every answer is the live one');
SELECT ok(pg_temp.same(pg_temp.t() + interval '37 minutes 12.5 seconds'), 'at T + 37 min 12.5 s: every answer is the live one');
SELECT ok(pg_temp.same(pg_temp.t() + interval '1 hour 59 minutes'), 'at T + 1 h 59 min: every answer is the live one');

-- They do come from the spans: a span's figure changed behind pgbus's back shows.
UPDATE pgbus.workflow_insights_span_runs SET finished = finished + 100, bins[4] = bins[4] + 7
WHERE workflow_class = 'ins.Shop' AND span_id = (SELECT span_id FROM pgbus.workflow_insights_spans WHERE to_hour = pg_temp.t() AND to_hour - from_hour = interval '22 hours');
SELECT is((SELECT jsonb_build_array(o.finished, (pgbus.workflow_class_durations('ins.Shop', '24h', NULL, pg_temp.t()) -> 'bins' -> 3 ->> 'runs')::int)
           FROM pgbus.workflow_definitions_overview('24h', NULL, pg_temp.t()) o WHERE o.workflow_class = 'ins.Shop'),
          '[104, 10]'::jsonb, 'the list and the durations read the span (3 + 7 in the 1-10 min bin; the run ending at T took 600 s: the next bin)');
UPDATE pgbus.workflow_insights_span_attempts SET failed = failed + 1
WHERE run_class = 'ins.Shop' AND step_name = 'ship' AND NOT per_revision
  AND span_id = (SELECT span_id FROM pgbus.workflow_insights_spans WHERE to_hour = pg_temp.t() AND to_hour - from_hour = interval '22 hours');
SELECT is((SELECT s ->> 'failed' FROM jsonb_array_elements(pgbus.workflow_class_steps('ins.Shop', '24h', NULL, pg_temp.t()) -> 'steps') s
           WHERE s ->> 'step_name' = 'ship'), '2', 'the pipeline reads the span');

-- A write into one of its hours forgets the spans holding that hour (and the hour), not the others.
SELECT 1 FROM pg_temp.att('f1', 'charge', 'completed', 'complete', pg_temp.t() - interval '150 minutes', pg_temp.t() - interval '150 minutes', pg_temp.t() - interval '150 minutes' + interval '7 seconds');
SELECT is(pg_temp.span_hours(interval '24 hours', pg_temp.t()), NULL, 'an attempt written into the hour 150 min before T: no span holding it is read any more');
SELECT ok(pg_temp.same(pg_temp.t()), 'the answers count it (that hour live, the others from their hours)');
-- A span is built only when all its hours are rolled up.
SELECT is(pgbus.workflow_insights_build_spans(pg_temp.t()), 0, 'with an hour forgotten no span is built');
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') >= 1 AND pgbus.workflow_insights_build_spans(pg_temp.t()) = 3
          AND pg_temp.same(pg_temp.t() + interval '37 minutes 12.5 seconds'),
          'rolled up again, the spans are built again and the answers stay the live ones');
-- An hour of a span rolled up again after the span was built (in the same transaction, say):
-- its rollup number is higher than the span's, and the span is not read.
UPDATE pgbus.workflow_insights_hours SET rolled_seq = nextval('pgbus.workflow_insights_rollup_seq')
WHERE hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '5 hours');
SELECT is(ARRAY[pg_temp.span_hours(interval '24 hours', pg_temp.t()), pg_temp.span_hours(interval '720 hours', pg_temp.t())], ARRAY[NULL, NULL]::integer[],
          'an hour rolled up again after the spans were built: no span holding it is read');

SELECT * FROM finish();
ROLLBACK;
