-- pgTAP tests for the insights' rollup of closed hours (sql/functions/530_workflow_insights_rollup.sql,
-- sql/schema/0018): with the fixed data of the other insights tests rolled up, every insights
-- function answers exactly what it answers live (SET pgbus.insights_rollup = off), for windows
-- with ragged ends, capped or not, throughput buckets in zones whole and half an hour off UTC;
-- the answers do come from the rollup; and every write that
-- could make a rolled-up hour wrong forgets it, while pgbus's own writes of a step do not.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(42);
\ir ../include/insights_setup.psql

\ir ../include/insights_answers.psql

-- The moments compared: T, T with ragged hour ends, and two days after T.
CREATE FUNCTION pg_temp.same() RETURNS boolean LANGUAGE sql AS $f$
    SELECT bool_and(pg_temp.answers(a) = pg_temp.live(a))
    FROM unnest(ARRAY[pg_temp.t(), pg_temp.t() + interval '37 minutes 12.5 seconds', pg_temp.t() + interval '2 days']) a
$f$;
CREATE FUNCTION pg_temp.rolled(at timestamptz) RETURNS boolean LANGUAGE sql AS $f$
    SELECT EXISTS (SELECT 1 FROM pgbus.workflow_insights_hours WHERE hour = pgbus.workflow_insights_hour(at))
$f$;
CREATE FUNCTION pg_temp.funnel_rolled(at timestamptz) RETURNS boolean LANGUAGE sql AS $f$
    SELECT EXISTS (SELECT 1 FROM pgbus.workflow_insights_funnel_hours WHERE hour = pgbus.workflow_insights_hour(at))
$f$;
CREATE TEMP TABLE before AS SELECT a, pg_temp.live(a) AS j
FROM unnest(ARRAY[pg_temp.t(), pg_temp.t() + interval '37 minutes 12.5 seconds', pg_temp.t() + interval '2 days']) a;

-- Nothing rolled up yet: the answers are the live ones.
SELECT is((SELECT count(*) FROM pgbus.workflow_insights_hours), 0::bigint, 'nothing rolled up before the first rollup');
SELECT ok(pg_temp.same(), 'without a rollup every answer is the live one');

-- Roll up every closed hour from 32 days before T.
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') > 2 * 32 * 24, 'the rollup rolls up the hours from `since` on (attempts and runs by end, the funnel by creation)');
SELECT is(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days'), 0, 'rolling up again does nothing (idempotent)');
SELECT ok(pg_temp.rolled(pg_temp.t() - interval '5 hours') AND pg_temp.funnel_rolled(pg_temp.t() - interval '8 hours'), 'the fixture''s hours are rolled up');
SELECT is((SELECT n FROM pgbus.workflow_insights_attempt_hours WHERE run_class = 'ins.Shop' AND step_name = 'ship'
           AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '5 hours')), 20::bigint, 'ship''s 20 attempts of the hour 5 h before T, in one row');
SELECT is((SELECT run_times FROM pgbus.workflow_insights_attempt_hours WHERE run_class = 'ins.Shop' AND step_name = 'ship'
           AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '5 hours')),
          (SELECT array_agg(i::double precision ORDER BY i) FROM generate_series(1, 20) i), 'their run times, sorted');
SELECT is((SELECT jsonb_build_array(finished, cancelled, durations) FROM pgbus.workflow_insights_run_hours
           WHERE workflow_class = 'ins.Shop' AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '1 hour')),
          '[1, 1, [60]]'::jsonb, 'runs that ended in the hour before T: one finished (after 60 s), one cancelled');
SELECT is((SELECT jsonb_agg(jsonb_build_array(step_name, reached, cancelled) ORDER BY step_name) FROM pgbus.workflow_insights_funnel_steps
           WHERE workflow_class = 'ins.Fun' AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '8 hours')),
          '[["a", 1, 1]]'::jsonb, 'funnel: of the runs created 8 h before T only the cancelled one has ended (it reached a, was cancelled at a)');
SELECT ok(NOT pg_temp.rolled(now()), 'the current hour is not closed');

-- The same answers, now from the rollup.
SELECT ok(pg_temp.same(), 'rolled up: every answer is the live one (percentiles, rates, funnel, revisions, windows capped or not, ragged ends)');
SELECT is((SELECT pg_temp.answers(a) FROM before WHERE a = pg_temp.t()), (SELECT j FROM before WHERE a = pg_temp.t()), 'and the one computed before the rollup');
-- They do come from the rollup: a rolled-up figure changed behind pgbus's back shows. (Hour
-- T-2h: f2 finished, f1 created (rolled up, +1000) and o_run created (ongoing: live); hour
-- T-1h: f1 finished (+100), f4 and f_future created.)
UPDATE pgbus.workflow_insights_attempt_hours SET failed = failed + 1 WHERE run_class = 'ins.Shop' AND step_name = 'ship'
  AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '5 hours');
SELECT is((SELECT s ->> 'failed' FROM jsonb_array_elements(pgbus.workflow_class_steps('ins.Shop', '24h', NULL, pg_temp.t()) -> 'steps') s
           WHERE s ->> 'step_name' = 'ship'), '2', 'the pipeline reads the rolled-up hour');
UPDATE pgbus.workflow_insights_attempt_hours SET failed = failed - 1 WHERE run_class = 'ins.Shop' AND step_name = 'ship'
  AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '5 hours');
UPDATE pgbus.workflow_insights_run_hours SET finished = finished + 100 WHERE workflow_class = 'ins.Shop'
  AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '1 hour');
UPDATE pgbus.workflow_insights_funnel_runs SET finished = finished + 1000 WHERE workflow_class = 'ins.Shop'
  AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '2 hours');
SELECT is((SELECT jsonb_agg(jsonb_build_array(b -> 'finished', b -> 'started') ORDER BY b ->> 'from')
           FROM jsonb_array_elements(pgbus.workflow_class_throughput('ins.Shop', '24h', 'UTC', NULL, pg_temp.t()) -> 'buckets') b
           WHERE (b ->> 'from')::timestamptz IN (pg_temp.t() - interval '2 hours', pg_temp.t() - interval '1 hour')),
          '[[1, 1002], [101, 2]]'::jsonb, 'throughput reads whole rolled-up hours (by end and, for runs started, the funnel''s by creation)');
SELECT is((SELECT jsonb_agg(b -> 'finished') FROM jsonb_array_elements(pgbus.workflow_class_throughput('ins.Shop', '24h', 'Asia/Kolkata', NULL, pg_temp.t()) -> 'buckets') b
           WHERE (b ->> 'from')::timestamptz = pg_temp.t() - interval '90 minutes'),
          '[1]'::jsonb, '... but not an hour split between two buckets (a zone half an hour off UTC): that one is read live');
UPDATE pgbus.workflow_insights_run_hours SET finished = finished - 100 WHERE workflow_class = 'ins.Shop'
  AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '1 hour');
UPDATE pgbus.workflow_insights_funnel_runs SET finished = finished - 1000 WHERE workflow_class = 'ins.Shop'
  AND hour = pgbus.workflow_insights_hour(pg_temp.t() - interval '2 hours');
SET LOCAL pgbus.insights_rollup = off;
SELECT is(pgbus.workflow_insights_covered(pg_temp.t() - interval '24 hours', pg_temp.t()), '{}'::tstzmultirange, 'pgbus.insights_rollup = off: nothing is read from the rollup');
SET LOCAL pgbus.insights_rollup = on;
SELECT is(pgbus.workflow_insights_covered(pg_temp.t() - interval '2 hours 30 minutes', pg_temp.t()),
          tstzmultirange(tstzrange(pg_temp.t() - interval '2 hours', pg_temp.t())),
          'a window reads its whole rolled-up hours only');

-- Writes that forget rolled-up hours, each followed by the live answers.
-- An attempt written with a past end (an import, a fixture).
SELECT 1 FROM pg_temp.att('f1', 'charge', 'completed', 'complete', pg_temp.t() - interval '150 minutes', pg_temp.t() - interval '150 minutes', pg_temp.t() - interval '150 minutes' + interval '7 seconds');
SELECT ok(NOT pg_temp.rolled(pg_temp.t() - interval '150 minutes'), 'an attempt written with a past end forgets its hour');
SELECT ok(NOT pg_temp.funnel_rolled(pg_temp.t() - interval '1 hour 60 seconds'), '... and its run''s funnel hour');
SELECT ok(pg_temp.rolled(pg_temp.t() - interval '5 hours'), '... and no other hour');
SELECT ok(pg_temp.same(), 'the answers count it (live)');
-- A second write into the same hours in this transaction after a rollup forgets them again
-- (the transaction's memory of what it forgot is cleared by the rollup).
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') >= 1 AND true, 'rolled up again');
SELECT ok(pg_temp.rolled(pg_temp.t() - interval '150 minutes'), 'the hour is rolled up again');
SELECT 1 FROM pg_temp.att('f1', 'charge', 'completed', 'complete', pg_temp.t() - interval '151 minutes', pg_temp.t() - interval '151 minutes', pg_temp.t() - interval '151 minutes' + interval '9 seconds');
SELECT ok(NOT pg_temp.rolled(pg_temp.t() - interval '150 minutes'), 'another attempt written into it forgets it again');
SELECT ok(pg_temp.same(), 'the answers count both');
-- An ended attempt changed.
UPDATE pgbus.workflow_steps SET status = 'superseded' WHERE step_id = (
    SELECT min(step_id) FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.id('f1') AND step_name = 'ship' AND status = 'completed');
SELECT ok(NOT pg_temp.rolled(pg_temp.t() - interval '5 hours'), 'an ended attempt changed forgets its hour');
SELECT ok(pg_temp.same(), 'the answers follow');
-- An ended run deleted (the sweep's old runs): its end's hour and its funnel hour.
DELETE FROM pgbus.workflows WHERE workflow_id = pg_temp.id('f3');
SELECT ok(NOT pg_temp.rolled(pg_temp.t() - interval '3 hours') AND NOT pg_temp.funnel_rolled(pg_temp.t() - interval '3 hours 180 seconds'),
          'an ended run deleted forgets its end''s hour and its funnel hour');
SELECT ok(pg_temp.same(), 'the answers follow');
-- Rolled up again: the forgotten hours come back, the answers stay.
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') BETWEEN 1 AND 10, 'the next rollup does the forgotten hours again');
SELECT ok(pg_temp.rolled(pg_temp.t() - interval '5 hours') AND pg_temp.funnel_rolled(pg_temp.t() - interval '3 hours 180 seconds'), 'they are rolled up');
SELECT ok(pg_temp.same(), 'and the answers are still the live ones');
-- A run of a rolled-up funnel hour that ends later (its end is not dated in the past).
SELECT ok(pg_temp.funnel_rolled(pg_temp.t() - interval '8 hours'), 'ins.Fun''s funnel hour 8 h before T is rolled up');
UPDATE pgbus.workflows SET status = 'cancelled', pause_cause = NULL, ended_at = clock_timestamp() WHERE workflow_id = pg_temp.id('r3');
SELECT ok(NOT pg_temp.funnel_rolled(pg_temp.t() - interval '8 hours'), 'a run created in a rolled-up hour that ends forgets its funnel hour');
SELECT ok(pg_temp.same(), 'the funnel counts it as cancelled now');
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') >= 1 AND pg_temp.same(), 'rolled up again: still the live answers');

-- An attempt whose run_class no run has (written by other means) is rolled up too.
INSERT INTO pgbus.workflow_steps (workflow_id, step_name, attempt, status, outcome, queue, scheduled_at, started_at, ended_at, created_at, run_class)
VALUES (pg_temp.id('g1'), 'stray', 1, 'completed', 'complete', 'q', pg_temp.t() - interval '4 hours', pg_temp.t() - interval '4 hours',
        pg_temp.t() - interval '4 hours' + interval '3 seconds', pg_temp.t() - interval '4 hours', 'ins.Stray');
CREATE FUNCTION pg_temp.stray_live() RETURNS jsonb LANGUAGE sql SET pgbus.insights_rollup = off AS $f$
    SELECT pgbus.workflow_class_steps('ins.Stray', '24h', NULL, pg_temp.t())
$f$;
SELECT ok(pgbus.workflow_insights_rollup(100000, pg_temp.t() - interval '32 days') >= 1, 'its hour is rolled up again');
SELECT ok(EXISTS (SELECT 1 FROM pgbus.workflow_insights_attempt_hours WHERE run_class = 'ins.Stray'),
          'an attempt of a class no run has is rolled up');
SELECT is(pgbus.workflow_class_steps('ins.Stray', '24h', NULL, pg_temp.t()), pg_temp.stray_live(), '... and read as live');

-- pgbus's own writes of a run and its steps forget nothing.
SELECT 1 FROM pgbus.workflow_register('ins.Hot', '[{"name": "one"}, {"name": "two"}]', 'd1', 'ins_hot');
CREATE TEMP TABLE counts AS SELECT (SELECT count(*) FROM pgbus.workflow_insights_hours) AS h, (SELECT count(*) FROM pgbus.workflow_insights_funnel_hours) AS f;
CREATE TEMP TABLE hot AS SELECT workflow_id FROM pgbus.workflow_start('ins.Hot', NULL, NULL, actor => 't');
UPDATE pgbus.workflow_steps SET status = 'running', started_at = clock_timestamp() WHERE workflow_id = (SELECT workflow_id FROM hot);
UPDATE pgbus.workflow_steps SET status = 'completed', outcome = 'complete', ended_at = clock_timestamp() WHERE workflow_id = (SELECT workflow_id FROM hot);
UPDATE pgbus.workflows SET status = 'finished', ended_at = clock_timestamp() WHERE workflow_id = (SELECT workflow_id FROM hot);
SELECT is((SELECT jsonb_build_array(h, f) FROM counts),
          jsonb_build_array((SELECT count(*) FROM pgbus.workflow_insights_hours), (SELECT count(*) FROM pgbus.workflow_insights_funnel_hours)),
          'a run started, its step begun and ended, the run ended (dated now): no rolled-up hour forgotten');

-- The sweep forgets hours older than its horizon; TRUNCATE forgets all.
SELECT ok(pgbus.workflow_insights_rollup(0, pg_temp.t() - interval '1 day') = 0
          AND NOT pg_temp.rolled(pg_temp.t() - interval '2 days') AND pg_temp.rolled(pg_temp.t() - interval '5 hours'),
          'hours before the horizon are forgotten');
SET CONSTRAINTS ALL IMMEDIATE;
TRUNCATE pgbus.workflows CASCADE;
SELECT is((SELECT count(*) FROM pgbus.workflow_insights_hours) + (SELECT count(*) FROM pgbus.workflow_insights_funnel_hours), 0::bigint,
          'TRUNCATE forgets every hour');

SELECT * FROM finish();
ROLLBACK;
