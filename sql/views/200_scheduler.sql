-- The Recurring page and the MCP tool pgbus_recurring read this: each task with its schedule in
-- words, next and last run, and how its latest execution went out.
CREATE OR REPLACE VIEW pgbus.recurring_task_list AS
SELECT t.key, t.target, t.class_name, t.arguments, t.schedule, t.human_schedule, t.time_zone,
       t.queue_name, t.priority, t.description, t.enabled, t.static,
       CASE WHEN t.enabled THEN t.next_run_at END AS next_run_at,
       t.last_run_at,
       (SELECT count(*)::integer FROM pgbus.recurring_executions e
        WHERE e.task_key = t.key AND e.run_at >= now() - interval '24 hours') AS executions_24h,
       t.created_at, t.updated_at
FROM pgbus.recurring_tasks t;

-- (A function over the view above, so it is created after it.)
-- Every recurring task for the MCP tool pgbus_recurring and the dashboard, as one JSON answer:
-- {"recurring_tasks": [...], "total", "has_more"}. All tasks when page and per_page are NULL;
-- else that page (per_page at most 100, total capped at 10,000).
CREATE OR REPLACE FUNCTION pgbus.recurring_overview(page integer DEFAULT NULL, per_page integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH paging AS (
        SELECT (page IS NOT NULL OR per_page IS NOT NULL) AS paged,
               least(greatest(coalesce(per_page, 25), 1), 100) AS size,
               greatest(coalesce(page, 1), 1) AS number
    ), rows AS (
        SELECT to_jsonb(l) AS task, row_number() OVER (ORDER BY l.key) AS n
        FROM pgbus.recurring_task_list l
    ), counted AS (
        SELECT least(count(*), 10000)::integer AS total FROM (SELECT 1 FROM rows LIMIT 10000) c
    )
    SELECT jsonb_build_object(
        'recurring_tasks', coalesce((
            SELECT jsonb_agg(r.task ORDER BY r.n) FROM rows r, paging p
            WHERE NOT p.paged OR r.n BETWEEN (p.number - 1) * p.size + 1 AND p.number * p.size
        ), '[]'::jsonb),
        'total', CASE WHEN p.paged THEN c.total ELSE (SELECT count(*)::integer FROM rows) END,
        'has_more', p.paged AND (SELECT count(*) FROM rows) > p.number * p.size)
    FROM paging p, counted c
$$;
