-- The workflow gauges on their own, without sweeping: what the dispatcher reports when pg_cron
-- runs the sweep instead (workflow_sweep_enabled = False), and what a metrics scraper can read.

-- {"runs": [{"workflow_class", "status", "count"}] of ongoing runs, "stuck": [{"workflow_class",
-- "reason", "count"}] as pgbus.workflow_stuck tells it}: the same shape as the sweep's answer.
CREATE OR REPLACE FUNCTION pgbus.workflow_gauges(
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'runs', coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_class', c.workflow_class,
                                                               'status', c.status, 'count', c.n))
                          FROM (SELECT w.workflow_class, w.status, count(*) AS n FROM pgbus.workflows w
                                WHERE w.ended_at IS NULL  -- ongoing
                                GROUP BY 1, 2) c), '[]'),
        'stuck', coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_class', k.workflow_class,
                                                                'reason', k.reason, 'count', k.n))
                           FROM (SELECT x.workflow_class, x.reason, count(*) AS n
                                 FROM pgbus.workflow_stuck(stall_threshold, overdue_after, waiting_threshold) x
                                 GROUP BY 1, 2) k), '[]'))
$$;
