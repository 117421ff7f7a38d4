-- pgTAP tests for pgbus.workflow_class_throughput (sql/functions/520_workflow_class_insights.sql):
-- runs started, finished and cancelled per bucket, on the dashboard zone's wall clock (DST days
-- in America/Santiago and Europe/Berlin, and UTC), runs after as_of left out.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);
\ir ../include/insights_setup.psql

CREATE FUNCTION pg_temp.bucket(j jsonb, at timestamptz) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT b FROM jsonb_array_elements($1 -> 'buckets') b WHERE (b ->> 'from')::timestamptz = $2
$f$;

-- UTC, 24 h: ins.Shop started f1 (T-1h1m), f2 (T-2h2m), f3 (T-3h3m), f4 (T-10m), f_future (T-10s),
-- c1 (T-5h), o_ready1 (T-3h), o_ready2 (T-4h), o_run (T-2h), o_paused (T-6h), o_old (T-10h):
-- 11 in the window; f_old, o_wait, o_legacy before it, o_future after T.
CREATE TEMP TABLE u AS SELECT pgbus.workflow_class_throughput('ins.Shop', '24h', 'UTC', NULL, pg_temp.t()) AS j;
SELECT is((SELECT jsonb_array_length(j -> 'buckets') FROM u), 25, 'UTC 24 h: 25 hour buckets');
SELECT is((SELECT sum((b ->> 'started')::int)::int FROM u, jsonb_array_elements(u.j -> 'buckets') b), 11, 'started: 11 in the window');
SELECT is((SELECT sum((b ->> 'finished')::int)::int FROM u, jsonb_array_elements(u.j -> 'buckets') b), 4, 'finished: 4 (the one after as_of left out)');
SELECT is((SELECT jsonb_build_object('s', b -> 'started', 'f', b -> 'finished', 'c', b -> 'cancelled', 'to', b -> 'to')
           FROM u, pg_temp.bucket(u.j, pg_temp.t()) b),
          jsonb_build_object('s', 0, 'f', 1, 'c', 0, 'to', pg_temp.t() + interval '1 microsecond'),
          'the last bucket holds the run that finished exactly at as_of and ends at until');
SELECT is((SELECT jsonb_build_object('s', b -> 'started', 'f', b -> 'finished', 'c', b -> 'cancelled')
           FROM u, pg_temp.bucket(u.j, pg_temp.t() - interval '1 hour') b), '{"s": 2, "f": 1, "c": 1}'::jsonb,
          '11:00-12:00: f4 and f_future started, f1 finished (at 11:00 exactly), c1 cancelled');
SELECT is((SELECT j ->> 'time_zone' FROM u), 'UTC', 'the zone used');

-- America/Santiago, 7 days ending 2026-09-08 12:00 -03. Started: 2026-09-06 03:30 UTC (23:30 -04
-- on the 5th), 04:30 UTC (01:30 -03 on the 6th, the day whose midnight is skipped), 2026-09-07
-- 02:30 UTC (23:30 -03 on the 6th). Finished: one at 2026-09-06 04:00 UTC (the 6th's first instant).
SELECT pg_temp.run('s1', 'ins.Tz', 'ready', '2026-09-06 03:30+00');
SELECT pg_temp.run('s2', 'ins.Tz', 'ready', '2026-09-06 04:30+00');
SELECT pg_temp.run('s3', 'ins.Tz', 'finished', '2026-09-05 04:00+00', '2026-09-06 04:00+00');
SELECT pg_temp.run('s4', 'ins.Tz', 'ready', '2026-09-07 02:30+00');
CREATE TEMP TABLE sa AS SELECT pgbus.workflow_class_throughput('ins.Tz', '7d', 'America/Santiago', NULL, timestamptz '2026-09-08 15:00+00') AS j;
SELECT is((SELECT jsonb_agg(jsonb_build_array(b -> 'from', b -> 'started', b -> 'finished') ORDER BY b ->> 'from') FROM sa, jsonb_array_elements(sa.j -> 'buckets') b
           WHERE (b ->> 'from')::timestamptz BETWEEN '2026-09-05 04:00+00' AND '2026-09-07 03:00+00'),
          '[["2026-09-05T04:00:00+00:00", 2, 0], ["2026-09-06T04:00:00+00:00", 2, 1], ["2026-09-07T03:00:00+00:00", 0, 0]]'::jsonb,
          'America/Santiago: the 5th holds s1 and s3''s starts, the 6th (from 01:00 -03) s2, s4 and s3''s end');
SELECT is((SELECT count(*)::int FROM sa, jsonb_array_elements(sa.j -> 'buckets') b), 8, 'America/Santiago 7 days: 8 buckets (first and last partial)');

-- Europe/Berlin, 7 days ending 2026-10-27 12:00 +01: 2026-10-25 (25 h) starts 2026-10-24 22:00 UTC.
SELECT pg_temp.run('b1', 'ins.Berlin', 'finished', '2026-10-24 21:30+00', '2026-10-24 22:30+00');
SELECT pg_temp.run('b2', 'ins.Berlin', 'ready', '2026-10-25 22:30+00');
SELECT pg_temp.run('b3', 'ins.Berlin', 'cancelled', '2026-10-25 23:30+00', '2026-10-25 23:40+00');
CREATE TEMP TABLE be AS SELECT pgbus.workflow_class_throughput('ins.Berlin', '7d', 'Europe/Berlin', NULL, timestamptz '2026-10-27 11:00+00') AS j;
SELECT is((SELECT jsonb_agg(jsonb_build_array(b -> 'from', b -> 'to', b -> 'started', b -> 'finished', b -> 'cancelled') ORDER BY b ->> 'from')
           FROM be, jsonb_array_elements(be.j -> 'buckets') b
           WHERE (b ->> 'from')::timestamptz BETWEEN '2026-10-23 22:00+00' AND '2026-10-25 23:00+00'),
          '[["2026-10-23T22:00:00+00:00", "2026-10-24T22:00:00+00:00", 1, 0, 0],
            ["2026-10-24T22:00:00+00:00", "2026-10-25T23:00:00+00:00", 1, 1, 0],
            ["2026-10-25T23:00:00+00:00", "2026-10-26T23:00:00+00:00", 1, 0, 1]]'::jsonb,
          'Europe/Berlin: the 25th lasts 25 h; 23:30 local on the 25th and 00:30 on the 26th fall in their own days');
-- NULL zone: the server's TimeZone.
SET LOCAL TimeZone = 'Europe/Berlin';
SELECT is((SELECT array_agg(row((b ->> 'from')::timestamptz, (b ->> 'to')::timestamptz, b -> 'started', b -> 'finished')::text)
           FROM jsonb_array_elements(pgbus.workflow_class_throughput('ins.Berlin', '7d', NULL, NULL, timestamptz '2026-10-27 11:00+00') -> 'buckets') b),
          (SELECT array_agg(row((b ->> 'from')::timestamptz, (b ->> 'to')::timestamptz, b -> 'started', b -> 'finished')::text)
           FROM be, jsonb_array_elements(be.j -> 'buckets') b),
          'no zone given: the server''s TimeZone');
SELECT throws_ok($$SELECT pgbus.workflow_class_throughput('ins.Shop', '24h', 'Mars/Olympus')$$, '22023', NULL, 'an unknown zone raises 22023');
SELECT throws_ok($$SELECT pgbus.workflow_class_throughput('ins.Shop', '12h')$$, '22023', NULL, 'an unknown window raises 22023');

SELECT * FROM finish();
ROLLBACK;
