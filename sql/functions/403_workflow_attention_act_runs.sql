-- The attention page's bulk resume or cancel (pgbus.workflow_attention_act), answering also
-- which runs it acted on, so the caller can emit each one's instrumentation once the
-- transaction commits (the same events a single resume or cancel emits):
--   workflow_attention_act's answer || {"runs": [{"workflow_id", "workflow_class", "status"}]}
-- in the order they were done. The runs are the ones whose 'resumed' / 'cancelled' audit event
-- this very transaction wrote (event ids only grow, so the scan starts past the newest event id
-- seen before the call); a refused or moved-on run wrote none and is not listed.
CREATE OR REPLACE FUNCTION pgbus.workflow_attention_act_runs(
    verb text, workflow_class text, step_name text, reason text, error_class text,
    actor text DEFAULT NULL, why text DEFAULT NULL, max_runs integer DEFAULT 500,
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    before_id bigint;
    answer jsonb;
BEGIN
    SELECT coalesce(max(e.event_id), 0) INTO before_id FROM pgbus.workflow_events e;
    answer := pgbus.workflow_attention_act(
        verb => verb, workflow_class => workflow_class, step_name => step_name, reason => reason,
        error_class => error_class, actor => actor, why => why, max_runs => max_runs,
        stall_threshold => stall_threshold, overdue_after => overdue_after,
        waiting_threshold => waiting_threshold);
    IF NOT coalesce((answer ->> 'ok')::boolean, false) THEN
        RETURN answer || jsonb_build_object('runs', '[]'::jsonb);
    END IF;
    RETURN answer || jsonb_build_object('runs', coalesce((
        SELECT jsonb_agg(jsonb_build_object('workflow_id', w.workflow_id,
                                            'workflow_class', w.workflow_class,
                                            'status', w.status) ORDER BY e.event_id)
        FROM pgbus.workflow_events e
        JOIN pgbus.workflows w ON w.workflow_id = e.workflow_id
        WHERE e.event_id > before_id
          AND e.xmin = pg_current_xact_id()::xid
          AND e.event = CASE workflow_attention_act_runs.verb WHEN 'resume' THEN 'resumed'
                                                              ELSE 'cancelled' END
          AND e.actor IS NOT DISTINCT FROM workflow_attention_act_runs.actor), '[]'::jsonb));
END;
$$;
