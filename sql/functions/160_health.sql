-- The health verdict shared by /readyz, `pgbus doctor` and the MCP server's health tool:
-- OK, DEGRADED (something needs an operator, work still flows) or STALLED (work waits and
-- nothing takes it), with one reason per finding.
--
-- Operational queues are all but dead-letter queues; backlog = those with visible messages;
-- active backlog = backlog minus paused queues; a queue is drained when a live worker reads it.
-- STALLED when (a worker is stalled and there is active backlog) or (a worker is alive and a
--   drained, unpaused queue has a visible never-read message older than unclaimed_after).
-- DEGRADED for: stale processes; paused queues holding backlog; backlog no worker drains;
--   dead letters; an open transaction older than long_transaction.
-- (Its earlier signatures.)
DROP FUNCTION IF EXISTS pgbus.health_verdict(interval, interval, interval, interval);
DROP FUNCTION IF EXISTS pgbus.health_verdict(interval, interval, interval, interval, integer);

-- count_limit as in queue_stats (the rules only ask whether a count is above zero);
-- queue_figures: the answer of pgbus.queue_figures when the caller has it already.
CREATE OR REPLACE FUNCTION pgbus.health_verdict(
    stalled_after interval DEFAULT interval '30 seconds',
    stale_after interval DEFAULT interval '5 minutes',
    unclaimed_after interval DEFAULT interval '60 seconds',
    long_transaction interval DEFAULT interval '300 seconds',
    count_limit integer DEFAULT 1000,
    queue_figures jsonb DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    stalled_reasons text[] := '{}';
    degraded_reasons text[] := '{}';
    names text[];
    oldest_tx float8;
    n_stalled integer;
    n_stale integer;
    n_alive integer;
    summary jsonb;
    qs jsonb;
BEGIN
    -- Each queue's figures are read once (counting a queue scans it).
    qs := coalesce(queue_figures, pgbus.queue_figures(stale_after, count_limit));

    SELECT count(*) FILTER (WHERE p.status = 'stalled' AND p.kind = 'worker'),
           count(*) FILTER (WHERE p.status = 'stale'),
           count(*) FILTER (WHERE p.status IN ('healthy', 'stalled') AND p.kind = 'worker')
        INTO n_stalled, n_stale, n_alive
        FROM pgbus.process_status(stalled_after, stale_after) p;
    SELECT o.age_seconds INTO oldest_tx FROM pgbus.oldest_transaction o;

    -- STALLED
    names := ARRAY(SELECT q.queue_name FROM jsonb_to_recordset(qs) AS q(queue_name text, is_dlq boolean, depth bigint, visible bigint, visible_unread bigint, paused boolean, drained boolean, oldest_claimable_age_seconds float8)
                   WHERE NOT q.is_dlq AND q.visible > 0 AND NOT q.paused ORDER BY 1);
    IF n_stalled > 0 AND cardinality(names) > 0 THEN
        stalled_reasons := stalled_reasons || (n_stalled || ' stalled worker(s) while queues hold work: '
                                               || pgbus.name_list(names));
    END IF;
    names := ARRAY(SELECT q.queue_name FROM jsonb_to_recordset(qs) AS q(queue_name text, is_dlq boolean, depth bigint, visible bigint, visible_unread bigint, paused boolean, drained boolean, oldest_claimable_age_seconds float8)
                   WHERE NOT q.is_dlq AND NOT q.paused AND q.drained AND q.visible_unread > 0
                     AND q.oldest_claimable_age_seconds > extract(epoch FROM unclaimed_after)
                   ORDER BY 1);
    IF n_alive > 0 AND cardinality(names) > 0 THEN
        stalled_reasons := stalled_reasons || ('visible messages nobody claims for over '
                                               || pgbus.human_duration(extract(epoch FROM unclaimed_after))
                                               || ' in drained queues: ' || pgbus.name_list(names));
    END IF;

    -- DEGRADED
    IF n_stale > 0 THEN
        degraded_reasons := degraded_reasons || (n_stale || ' stale process(es): no heartbeat for over '
                                                 || pgbus.human_duration(extract(epoch FROM stale_after)));
    END IF;
    names := ARRAY(SELECT q.queue_name FROM jsonb_to_recordset(qs) AS q(queue_name text, is_dlq boolean, depth bigint, visible bigint, visible_unread bigint, paused boolean, drained boolean, oldest_claimable_age_seconds float8)
                   WHERE NOT q.is_dlq AND q.paused AND q.visible > 0 ORDER BY 1);
    IF cardinality(names) > 0 THEN
        degraded_reasons := degraded_reasons || ('paused queues hold work: ' || pgbus.name_list(names));
    END IF;
    names := ARRAY(SELECT q.queue_name FROM jsonb_to_recordset(qs) AS q(queue_name text, is_dlq boolean, depth bigint, visible bigint, visible_unread bigint, paused boolean, drained boolean, oldest_claimable_age_seconds float8)
                   WHERE NOT q.is_dlq AND NOT q.paused AND NOT q.drained AND q.visible > 0 ORDER BY 1);
    IF cardinality(names) > 0 THEN
        degraded_reasons := degraded_reasons || ('work in queues no worker drains: ' || pgbus.name_list(names));
    END IF;
    names := ARRAY(SELECT q.queue_name FROM jsonb_to_recordset(qs) AS q(queue_name text, is_dlq boolean, depth bigint, visible bigint, visible_unread bigint, paused boolean, drained boolean, oldest_claimable_age_seconds float8)
                   WHERE q.is_dlq AND q.depth > 0 ORDER BY 1);
    IF cardinality(names) > 0 THEN
        degraded_reasons := degraded_reasons || ('dead letters waiting: ' || pgbus.name_list(names));
    END IF;
    IF oldest_tx > extract(epoch FROM long_transaction) THEN
        degraded_reasons := degraded_reasons || ('a transaction has been open for '
                                                 || pgbus.human_duration(oldest_tx)
                                                 || ': it holds back vacuum of every queue table');
    END IF;

    SELECT jsonb_build_object(
               'queues', count(*) FILTER (WHERE NOT q.is_dlq),
               'total_visible', coalesce(sum(q.visible) FILTER (WHERE NOT q.is_dlq), 0),
               'total_depth', coalesce(sum(q.depth) FILTER (WHERE NOT q.is_dlq), 0),
               'dead_letters', coalesce(sum(q.depth) FILTER (WHERE q.is_dlq), 0),
               'workers', n_alive, 'stalled_workers', n_stalled, 'stale_processes', n_stale,
               'oldest_transaction_age_sec', oldest_tx)
        INTO summary FROM jsonb_to_recordset(qs) AS q(queue_name text, is_dlq boolean, depth bigint, visible bigint, visible_unread bigint, paused boolean, drained boolean, oldest_claimable_age_seconds float8);
    RETURN jsonb_build_object(
        'status', CASE WHEN cardinality(stalled_reasons) > 0 THEN 'STALLED'
                       WHEN cardinality(degraded_reasons) > 0 THEN 'DEGRADED'
                       ELSE 'OK' END,
        'reasons', to_jsonb(stalled_reasons || degraded_reasons),
        'checked_at', now(),
        'summary', summary);
END;
$$;

-- Up to 10 names, then "(+N more)".
CREATE OR REPLACE FUNCTION pgbus.name_list(names text[])
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_to_string(names[1:10], ', ')
           || CASE WHEN cardinality(names) > 10 THEN ' (+' || (cardinality(names) - 10) || ' more)' ELSE '' END
$$;
