-- Views the dashboard, the metrics endpoint and the MCP server read.

-- Batches with their progress.
CREATE OR REPLACE VIEW pgbus.batch_overview AS
SELECT b.batch_id, b.description, b.status, b.total_jobs, b.completed_jobs, b.discarded_jobs,
       b.total_jobs - b.completed_jobs - b.discarded_jobs AS pending_jobs,
       CASE WHEN b.total_jobs = 0 THEN 100
            ELSE floor(100.0 * (b.completed_jobs + b.discarded_jobs) / b.total_jobs)::integer
       END AS progress_percent,
       b.on_complete ->> 'job_class' AS on_complete_class,
       b.on_success ->> 'job_class' AS on_success_class,
       b.on_discard ->> 'job_class' AS on_discard_class,
       b.properties, b.created_at, b.finished_at
FROM pgbus.batches b;

-- The health of PGMQ's queue and archive tables: dead tuples, bloat (dead share of all
-- tuples), time since the last (auto)vacuum.
CREATE OR REPLACE VIEW pgbus.queue_table_health AS
SELECT s.relname::text AS table_name,
       CASE WHEN s.relname LIKE 'a\_%' THEN 'archive' ELSE 'queue' END AS kind,
       substr(s.relname, 3)::text AS queue_name,
       s.n_live_tup AS live_tuples, s.n_dead_tup AS dead_tuples,
       CASE WHEN s.n_live_tup + s.n_dead_tup = 0 THEN 0
            ELSE round(s.n_dead_tup::numeric / (s.n_live_tup + s.n_dead_tup), 3)::float8
       END AS bloat_ratio,
       extract(epoch FROM now() - greatest(s.last_vacuum, s.last_autovacuum))::float8
           AS last_vacuum_age_seconds
FROM pg_stat_user_tables s
WHERE s.schemaname = 'pgmq' AND (s.relname LIKE 'q\_%' OR s.relname LIKE 'a\_%');

-- The oldest open transaction on this server (it holds back vacuum of every queue table).
CREATE OR REPLACE VIEW pgbus.oldest_transaction AS
SELECT extract(epoch FROM now() - min(a.xact_start))::float8 AS age_seconds
FROM pg_stat_activity a
WHERE a.xact_start IS NOT NULL AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend';

-- Ongoing workflow runs by class and status (ended runs are not counted: they only grow).
CREATE OR REPLACE VIEW pgbus.workflow_status_counts AS
SELECT w.workflow_class, w.status, count(*) AS runs
FROM pgbus.workflows w
WHERE w.status IN ('ready', 'running', 'waiting', 'paused')
GROUP BY w.workflow_class, w.status;
