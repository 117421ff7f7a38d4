-- Job insights over one of the periods 1h, 24h, 7d, 30d, from the table pgbus.job_stats (one
-- row per execution outcome): throughput per bucket by status, the status split, and enqueue
-- latency (enqueued -> started) and run duration as p50/p95, overall and per bucket.
CREATE OR REPLACE FUNCTION pgbus.job_insights(period text DEFAULT '1h')
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    span interval;
    bucket interval;
    since timestamptz;
    first_bucket timestamptz;
BEGIN
    CASE period
        WHEN '1h' THEN span := interval '1 hour'; bucket := interval '1 minute';
        WHEN '24h' THEN span := interval '24 hours'; bucket := interval '15 minutes';
        WHEN '7d' THEN span := interval '7 days'; bucket := interval '2 hours';
        WHEN '30d' THEN span := interval '30 days'; bucket := interval '6 hours';
        ELSE RAISE EXCEPTION 'pgbus: job_insights period is 1h, 24h, 7d or 30d, got %', quote_nullable(period)
                 USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    since := now() - span;
    first_bucket := date_bin(bucket, since, timestamptz '2000-01-01 00:00:00+00');
    RETURN (
        WITH s AS (
            SELECT date_bin(bucket, j.created_at, timestamptz '2000-01-01 00:00:00+00') AS b, j.*
            FROM pgbus.job_stats j WHERE j.created_at > since
        ),
        buckets AS (
            SELECT g AS b FROM generate_series(first_bucket, now(), bucket) g
        ),
        per_bucket AS (
            SELECT bk.b,
                   count(s.id) FILTER (WHERE s.status = 'success') AS success,
                   count(s.id) FILTER (WHERE s.status = 'failed') AS failed,
                   count(s.id) FILTER (WHERE s.status = 'dead_lettered') AS dead_lettered,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY s.enqueue_latency_ms) AS latency_p50,
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY s.enqueue_latency_ms) AS latency_p95
            FROM buckets bk LEFT JOIN s ON s.b = bk.b
            GROUP BY bk.b
        )
        SELECT jsonb_build_object(
            'period', period,
            'bucket_seconds', extract(epoch FROM bucket)::integer,
            'since', since,
            'total', (SELECT count(*) FROM s),
            'status_counts', jsonb_build_object(
                'success', (SELECT count(*) FROM s WHERE s.status = 'success'),
                'failed', (SELECT count(*) FROM s WHERE s.status = 'failed'),
                'dead_lettered', (SELECT count(*) FROM s WHERE s.status = 'dead_lettered')),
            'latency_ms', (SELECT jsonb_build_object(
                'p50', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY s.enqueue_latency_ms)),
                'p95', round(percentile_cont(0.95) WITHIN GROUP (ORDER BY s.enqueue_latency_ms)))
                FROM s),
            'duration_ms', (SELECT jsonb_build_object(
                'p50', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY s.duration_ms)),
                'p95', round(percentile_cont(0.95) WITHIN GROUP (ORDER BY s.duration_ms)))
                FROM s),
            'buckets', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                            'at', pb.b, 'success', pb.success, 'failed', pb.failed,
                            'dead_lettered', pb.dead_lettered,
                            'latency_p50_ms', round(pb.latency_p50),
                            'latency_p95_ms', round(pb.latency_p95)) ORDER BY pb.b), '[]')
                        FROM per_bucket pb))
    );
END;
$$;
