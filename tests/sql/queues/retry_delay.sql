-- pgTAP tests for sql/functions/010_queues.sql: retry_delay.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(18);
\ir ../include/queues_setup.psql
-------------------------------------------------------------------------------------------------
-- retry_delay
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.retry_delay(1, interval '10 seconds', interval '1 hour', 0), interval '10 seconds',
          'retry_delay: attempt 1 waits base');
SELECT is(pgbus.retry_delay(2, interval '10 seconds', interval '1 hour', 0), interval '20 seconds',
          'retry_delay: attempt 2 waits 2 x base');
SELECT is(pgbus.retry_delay(5, interval '10 seconds', interval '1 hour', 0), interval '160 seconds',
          'retry_delay: attempt 5 waits 16 x base');
SELECT is(pgbus.retry_delay(0, interval '10 seconds', interval '1 hour', 0), interval '10 seconds',
          'retry_delay: attempt 0 counts as the first');
SELECT is(pgbus.retry_delay(-3, interval '10 seconds', interval '1 hour', 0), interval '10 seconds',
          'retry_delay: a negative attempt counts as the first');
SELECT is(pgbus.retry_delay(20, interval '10 seconds', interval '1 hour', 0), interval '1 hour',
          'retry_delay: capped at cap');
SELECT is(pgbus.retry_delay(1, interval '2 hours', interval '1 hour', 0), interval '1 hour',
          'retry_delay: a base above cap is capped');
SELECT is(pgbus.retry_delay(3, interval '0', interval '1 hour', 0), interval '0',
          'retry_delay: a zero base waits nothing');
SELECT is(pgbus.retry_delay(2147483647, interval '1 second', interval '1 hour', 0), interval '1 hour',
          'retry_delay: the largest attempt does not overflow and is the cap');
SELECT is(pgbus.retry_delay(2147483647, interval '1 hour', interval '1 day', 0), interval '1 day',
          'retry_delay: the largest attempt with a 1 h base is the cap');
SELECT is(pg_temp.eval($$SELECT pgbus.retry_delay(40, make_interval(secs => 86400), make_interval(secs => 604800), 0)
                            = interval '7 days'$$), 'true',
          'retry_delay: many attempts with a 1-day base (as job_failed builds it) is the cap, no overflow');
SELECT is(pg_temp.eval($$SELECT pgbus.retry_delay(31, interval '3 hours', interval '1 day', 0.1)
                            BETWEEN interval '21.6 hours' AND interval '1 day'$$), 'true',
          'retry_delay: attempt 31 with a 3-hour base is within jitter of the cap, no overflow');
SELECT ok((SELECT bool_and(d BETWEEN interval '30 minutes' AND interval '1 hour')
           FROM (SELECT pgbus.retry_delay(2147483647, interval '1 second', interval '1 hour', 0.5) AS d
                 FROM generate_series(1, 200)) s),
          'retry_delay: the largest attempt with jitter stays within [cap x (1 - jitter), cap]');

-- Jitter spreads around the exponential value, both ways, within +/- jitter.
CREATE TEMP TABLE t_jitter AS
    SELECT pgbus.retry_delay(3, interval '10 seconds', interval '1 hour', 0.25) AS d FROM generate_series(1, 500);
SELECT ok((SELECT bool_and(d BETWEEN interval '30 seconds' AND interval '50 seconds') FROM t_jitter),
          'retry_delay: with jitter 0.25 every delay is within 40 s +/- 25%');
SELECT ok((SELECT min(d) < interval '40 seconds' AND max(d) > interval '40 seconds' FROM t_jitter),
          'retry_delay: jitter spreads delays below and above the exponential value');
SELECT ok((SELECT count(DISTINCT d) > 1 FROM t_jitter), 'retry_delay: jittered delays differ');
SELECT ok((SELECT bool_and(d BETWEEN interval '30 seconds' AND interval '60 seconds')
           FROM (SELECT pgbus.retry_delay(10, interval '10 seconds', interval '60 seconds', 0.5) AS d
                 FROM generate_series(1, 200)) s),
          'retry_delay: with jitter the delay never exceeds cap');
SELECT ok((SELECT bool_and(d >= interval '0')
           FROM (SELECT pgbus.retry_delay(2, interval '10 seconds', interval '1 hour', 3) AS d
                 FROM generate_series(1, 200)) s),
          'retry_delay: never negative, even with a jitter above 1');

SELECT * FROM finish();
ROLLBACK;
