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
