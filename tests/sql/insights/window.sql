-- pgTAP tests for sql/functions/500_workflow_insights_window.sql: the window (its four names,
-- the retention cap, its end just after as_of), the attempts of a class in it, and the
-- buckets of the charts (DST days in America/Santiago, Europe/Berlin and UTC).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(22);
\ir ../include/insights_setup.psql

SELECT is((SELECT row(since, until, capped, bucket)::text FROM pgbus.workflow_insights_window('24h', interval '30 days', pg_temp.t())),
          row(pg_temp.t() - interval '24 hours', pg_temp.t() + interval '1 microsecond', false, 'hour')::text,
          'window 24h: [as_of - 24 h, as_of + 1 µs), hour buckets');
SELECT is((SELECT row(since, bucket)::text FROM pgbus.workflow_insights_window('1h', NULL, pg_temp.t())),
          row(pg_temp.t() - interval '1 hour', '5 minutes')::text, 'window 1h: 5-minute buckets');
SELECT is((SELECT row(since, bucket)::text FROM pgbus.workflow_insights_window('7d', NULL, pg_temp.t())),
          row(pg_temp.t() - interval '7 days', 'day')::text, 'window 7d: day buckets');
SELECT is((SELECT row(since, bucket, capped)::text FROM pgbus.workflow_insights_window('30d', NULL, pg_temp.t())),
          row(pg_temp.t() - interval '30 days', 'day', false)::text, 'window 30d: no retention, no cap');
SELECT is((SELECT row(since, capped)::text FROM pgbus.workflow_insights_window('30d', interval '7 days', pg_temp.t())),
          row(pg_temp.t() - interval '7 days', true)::text, 'window 30d capped at a 7-day retention');
SELECT is((SELECT row(since, capped)::text FROM pgbus.workflow_insights_window('1h', interval '7 days', pg_temp.t())),
          row(pg_temp.t() - interval '1 hour', false)::text, 'a retention longer than the window changes nothing');
SELECT is((SELECT since FROM pgbus.workflow_insights_window()), now() - interval '24 hours', 'defaults: 24h ending now');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_insights_window('2h')$$, '22023', NULL, 'an unknown window raises 22023');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_insights_window(NULL)$$, '22023', NULL, 'a NULL window raises 22023');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_insights_window('1h', NULL, NULL)$$, '22023', NULL, 'a NULL as_of raises 22023');

-- The attempts of a class in the window: ins.Shop has 4 charge + 20 ship attempts ended in
-- [T - 24 h, T]; one ended after T, a superseded one and one 29 h old are left out.
SELECT is((SELECT count(*)::int FROM pgbus.workflow_class_window_attempts('ins.Shop', pg_temp.t() - interval '24 hours', pg_temp.t() + interval '1 microsecond')),
          24, 'window attempts: only those that ended in the window, not superseded');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_class_window_attempts('ins.Shop', pg_temp.t() - interval '30 hours', pg_temp.t() + interval '2 minutes')),
          26, 'window attempts: a wider window takes the 29 h old one and the one a minute after T');

-- Buckets. UTC, 24 h ending on the hour: 25 hour buckets, the last one 1 µs long.
SELECT is((SELECT count(*)::int FROM pgbus.workflow_insights_buckets(pg_temp.t() - interval '24 hours', pg_temp.t() + interval '1 microsecond', 'hour', 'UTC')),
          25, 'UTC hours: 25 buckets over 24 h ending on the hour');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_insights_buckets(pg_temp.t() - interval '1 hour', pg_temp.t() + interval '1 microsecond', '5 minutes', 'UTC')),
          13, '5-minute buckets: 13 over 1 h ending on a mark');
SELECT is((SELECT array_agg(bucket_from ORDER BY bucket_start) FROM pgbus.workflow_insights_buckets(
              timestamptz '2026-06-14 13:30+00', timestamptz '2026-06-16 12:00+00', 'day', 'UTC')),
          ARRAY[timestamptz '2026-06-14 13:30+00', '2026-06-15 00:00+00', '2026-06-16 00:00+00'],
          'UTC days: the first bucket starts at the window''s start, the others at midnight');
-- America/Santiago: on 2026-09-06 clocks go from 00:00 (-04) to 01:00 (-03), midnight skipped:
-- that day's bucket starts at its first hour, 01:00 -03 = 04:00 UTC, and lasts 23 h.
SELECT is((SELECT array_agg(bucket_from ORDER BY bucket_start) FROM pgbus.workflow_insights_buckets(
              timestamptz '2026-09-05 04:00+00', timestamptz '2026-09-08 03:00+00', 'day', 'America/Santiago')),
          ARRAY[timestamptz '2026-09-05 04:00+00', '2026-09-06 04:00+00', '2026-09-07 03:00+00'],
          'America/Santiago: the day whose midnight is skipped starts at its first hour (01:00 -03)');
SELECT is((SELECT bucket_to - bucket_from FROM pgbus.workflow_insights_buckets(
              timestamptz '2026-09-05 04:00+00', timestamptz '2026-09-08 03:00+00', 'day', 'America/Santiago')
           WHERE bucket_start = '2026-09-06 04:00+00'), interval '23 hours', 'America/Santiago: that day is 23 h long');
-- On 2026-04-05 (back to -04) midnight happens once, at 04:00 UTC; 2026-04-04 lasts 25 h.
SELECT is((SELECT array_agg(bucket_from ORDER BY bucket_start) FROM pgbus.workflow_insights_buckets(
              timestamptz '2026-04-04 03:00+00', timestamptz '2026-04-06 04:00+00', 'day', 'America/Santiago')),
          ARRAY[timestamptz '2026-04-04 03:00+00', '2026-04-05 04:00+00'],
          'America/Santiago: the day clocks go back lasts 25 h, the next starts at local midnight (04:00 UTC)');
-- Europe/Berlin: 2026-03-29 lasts 23 h (from 23:00 UTC on the 28th), 2026-10-25 25 h.
SELECT is((SELECT array_agg(bucket_from ORDER BY bucket_start) FROM pgbus.workflow_insights_buckets(
              timestamptz '2026-03-28 23:00+00', timestamptz '2026-03-30 22:00+00', 'day', 'Europe/Berlin')),
          ARRAY[timestamptz '2026-03-28 23:00+00', '2026-03-29 22:00+00'], 'Europe/Berlin: midnights around the spring change');
SELECT is((SELECT array_agg(bucket_to - bucket_from ORDER BY bucket_start) FROM pgbus.workflow_insights_buckets(
              timestamptz '2026-10-24 22:00+00', timestamptz '2026-10-26 23:00+00', 'day', 'Europe/Berlin')),
          ARRAY[interval '25 hours', interval '24 hours'], 'Europe/Berlin: the autumn change''s day lasts 25 h');
SELECT is(pgbus.workflow_insights_bucket(timestamptz '2026-10-25 22:59:59+00', 'day', 'Europe/Berlin'), timestamptz '2026-10-24 22:00+00',
          'Europe/Berlin: 23:59:59 local on the 25th is in the 25th''s bucket');
SELECT is(pgbus.workflow_insights_bucket(timestamptz '2026-10-25 23:00+00', 'day', 'Europe/Berlin'), timestamptz '2026-10-25 23:00+00',
          'Europe/Berlin: local midnight starts the 26th');

SELECT * FROM finish();
ROLLBACK;
