-- pgTAP tests for sql/functions/030_job_outcomes.sql: record_job_stat.
-- (Split from job_outcomes.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);
\ir ../include/job_outcomes_setup.psql
-------------------------------------------------------------------------------------------------
-- record_job_stat
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat1', '{"job_class": "Stat"}', 'success', 12, 34, 2)$$,
                'record_job_stat: records a stat');
SELECT results_eq(
    $$SELECT job_class, queue_name, status, duration_ms, enqueue_latency_ms, retry_count, created_at
      FROM pgbus.job_stats WHERE queue_name = 't_outcomes_stat1'$$,
    $$VALUES ('Stat'::text, 't_outcomes_stat1'::text, 'success'::text, 12, 34::bigint, 2, now())$$,
    'record_job_stat: the row holds class, queue, status, duration, latency, retries, now()');
SELECT lives_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat2', '{"args": []}', 'failed', -5, NULL, -1)$$,
                'record_job_stat: records a stat without a job class, negative numbers');
SELECT is(pg_temp.stats('t_outcomes_stat2'), '(unknown) failed 0 - 0',
          'record_job_stat: no job_class gives (unknown); negative duration and retries become 0; no latency stays NULL');
SELECT lives_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat3', NULL, 'dead_lettered', NULL, NULL, NULL)$$,
                'record_job_stat: records a stat with NULL message and numbers');
SELECT is(pg_temp.stats('t_outcomes_stat3'), '(unknown) dead_lettered 0 - 0', 'record_job_stat: NULLs become (unknown) and 0');
SELECT throws_ok($$SELECT pgbus.record_job_stat('t_outcomes_stat4', '{"job_class": "Stat"}', 'exploded', 1, 1, 0)$$,
                 '23514', NULL, 'record_job_stat: refuses an unknown status');

SELECT * FROM finish();
ROLLBACK;
