-- The dispatcher's periodic duties, each one function so pg_cron can run it instead:
--   SELECT pgbus.cleanup_batches();  SELECT pgbus.prune_stale_processes();
--   SELECT pgbus.cleanup_job_stats();
-- Each returns how many rows it removed.

CREATE OR REPLACE FUNCTION pgbus.cleanup_batches(older_than interval DEFAULT interval '7 days')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgbus.batches
        WHERE status = 'finished' AND finished_at < now() - older_than
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

CREATE OR REPLACE FUNCTION pgbus.prune_stale_processes(silent_for interval DEFAULT interval '5 minutes')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgbus.processes WHERE last_heartbeat_at < now() - silent_for RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

CREATE OR REPLACE FUNCTION pgbus.cleanup_job_stats(retention interval DEFAULT interval '30 days')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgbus.job_stats WHERE created_at < now() - retention RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;
