-- pgTAP tests for sql/functions/040_processes.sql and sql/functions/050_maintenance.sql: cleanup_job_stats.
-- (Split from processes_and_maintenance.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);
\ir ../include/processes_and_maintenance_setup.psql
-------------------------------------------------------------------------------------------------
-- cleanup_job_stats
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$
    SELECT pgbus.record_job_stat('t_maint_stats', jsonb_build_object('job_class', c), 'success', 1, NULL, 0)
    FROM unnest(ARRAY['old_90d', 'old_31d', 'old_29d', 'old_2d', 'new']) c$$,
    'cleanup_job_stats setup: five stats');
UPDATE pgbus.job_stats SET created_at = now() - interval '90 days' WHERE job_class = 'old_90d';
UPDATE pgbus.job_stats SET created_at = now() - interval '31 days' WHERE job_class = 'old_31d';
UPDATE pgbus.job_stats SET created_at = now() - interval '29 days' WHERE job_class = 'old_29d';
UPDATE pgbus.job_stats SET created_at = now() - interval '2 days' WHERE job_class = 'old_2d';
SELECT is(pgbus.cleanup_job_stats(), 2, 'cleanup_job_stats: by default removes stats over 30 days old');
SELECT results_eq(
    $$SELECT job_class FROM pgbus.job_stats ORDER BY created_at$$,
    $$VALUES ('old_29d'::text), ('old_2d'), ('new')$$,
    'cleanup_job_stats: newer stats stay');
SELECT is(pgbus.cleanup_job_stats(), 0, 'cleanup_job_stats: nothing more to remove');
SELECT is(pgbus.cleanup_job_stats(interval '1 day'), 2, 'cleanup_job_stats: retention sets the threshold');
SELECT results_eq($$SELECT job_class FROM pgbus.job_stats$$, $$VALUES ('new'::text)$$, 'cleanup_job_stats: the stat of now stays');
SELECT is(pgbus.cleanup_job_stats(interval '0'), 0, 'cleanup_job_stats: a stat of now is not older than now');

SELECT * FROM finish();
ROLLBACK;
