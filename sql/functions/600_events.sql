-- The event bus on PGMQ topics: publishing (pgmq.send_topic copies an event into every queue
-- bound by a matching pattern), subscribing (a queue and a binding), the idempotent handlers'
-- claims, and the consumer's dead-letter move. Patterns: '*' one dot-separated segment, '#'
-- any number of segments.

-- A routing key PGMQ accepts ('orders.created': letters, digits, '.', '-', '_'; no empty
-- segment, no wildcard), else invalid_parameter_value with PGMQ's reason.
CREATE OR REPLACE FUNCTION pgbus.check_routing_key(routing_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM pgmq.validate_routing_key(routing_key);
EXCEPTION WHEN raise_exception THEN
    RAISE EXCEPTION 'pgbus: invalid routing key %: %', quote_nullable(routing_key), SQLERRM
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'routing keys are dot-separated words of a-z, A-Z, 0-9, - and _';
END;
$$;

-- A subscription pattern PGMQ accepts ('orders.*', 'orders.#', '#'), else invalid_parameter_value.
CREATE OR REPLACE FUNCTION pgbus.check_topic_pattern(pattern text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM pgmq.validate_topic_pattern(pattern);
EXCEPTION WHEN raise_exception THEN
    RAISE EXCEPTION 'pgbus: invalid topic pattern %: %', quote_nullable(pattern), SQLERRM
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'patterns are routing keys whose segments may be * (one segment) or # (any)';
END;
$$;

-- The message an event travels in: its id, payload (an object; anything else is wrapped as
-- {"value": ...}), publication time (UTC, microseconds) and routing key.
CREATE OR REPLACE FUNCTION pgbus.event_envelope(routing_key text, payload jsonb, event_id uuid DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN jsonb_build_object(
        'event_id', coalesce(event_id, gen_random_uuid()),
        'payload', CASE WHEN jsonb_typeof(payload) = 'object' THEN payload
                        ELSE jsonb_build_object('value', coalesce(payload, 'null'::jsonb)) END,
        'published_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'routing_key', routing_key);
END;
$$;

-- Publishes one event to every queue bound by a pattern matching `routing_key`, visible after
-- `delay_seconds`. Answers the event's id and how many queues it went to (0 when none is
-- bound). Inside the caller's transaction nothing is visible before it commits: this is the
-- transactional outbox, with nothing to poll.
CREATE OR REPLACE FUNCTION pgbus.publish(
    routing_key text, payload jsonb, headers jsonb DEFAULT NULL, delay_seconds integer DEFAULT 0
) RETURNS TABLE (event_id uuid, deliveries integer)
LANGUAGE plpgsql AS $$
DECLARE
    envelope jsonb;
BEGIN
    PERFORM pgbus.check_routing_key(routing_key);
    IF delay_seconds IS NULL OR delay_seconds < 0 THEN
        RAISE EXCEPTION 'pgbus: publish needs delay_seconds >= 0, got %', quote_nullable(delay_seconds)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'pgbus: event headers must be a JSON object, got %', jsonb_typeof(headers)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    envelope := pgbus.event_envelope(routing_key, payload);
    event_id := (envelope ->> 'event_id')::uuid;
    deliveries := pgmq.send_topic(routing_key, envelope, headers, delay_seconds);
    RETURN NEXT;
END;
$$;

-- Binds `pattern` to `queue`, creating the queue (with insert notifications) when missing.
-- Idempotent: true when the binding is new, false when it existed.
CREATE OR REPLACE FUNCTION pgbus.subscribe(pattern text, queue text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgbus.check_topic_pattern(pattern);
    PERFORM pgbus.ensure_queue(queue);
    IF EXISTS (SELECT 1 FROM pgmq.topic_bindings b
               WHERE b.pattern = subscribe.pattern AND b.queue_name = queue) THEN
        RETURN false;
    END IF;
    PERFORM pgmq.bind_topic(pattern, queue);
    RETURN true;
END;
$$;

-- Removes a binding (the queue and its messages stay); true when there was one.
CREATE OR REPLACE FUNCTION pgbus.unsubscribe(pattern text, queue text)
RETURNS boolean
LANGUAGE sql AS $$
    SELECT pgmq.unbind_topic(pattern, queue)
$$;

-- An idempotent handler's claim on an event, taken in the handler's transaction before it
-- runs: true when the handler should run (a fresh claim, or one left by a run that never
-- finished), false when a run already finished it. A second run while the first is still
-- going waits for it here on the claim's row, then sees whether it finished.
CREATE OR REPLACE FUNCTION pgbus.event_claim(event_id uuid, handler text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    done timestamptz;
BEGIN
    IF event_id IS NULL OR handler IS NULL OR btrim(handler) = '' THEN
        RAISE EXCEPTION 'pgbus: event_claim needs an event id and a handler'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgbus.processed_events AS p (event_id, handler)
    VALUES (event_claim.event_id, event_claim.handler)
    ON CONFLICT ON CONSTRAINT processed_events_pkey DO NOTHING;
    SELECT p.completed_at INTO done FROM pgbus.processed_events p
    WHERE p.event_id = event_claim.event_id AND p.handler = event_claim.handler
    FOR UPDATE;
    RETURN done IS NULL;
END;
$$;

-- The second phase: the handler finished (in the same transaction as its writes and the
-- message's archive). False when there was no claim to complete.
CREATE OR REPLACE FUNCTION pgbus.event_completed(event_id uuid, handler text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus.processed_events p SET completed_at = now()
    WHERE p.event_id = event_completed.event_id AND p.handler = event_completed.handler;
    RETURN FOUND;
END;
$$;

-- Moves an event message that may not run again to <queue>_dlq (pgbus.dead_letter: body kept,
-- error and origin in its headers, failure row cleared). Answers whether it moved and the
-- class of the last failure recorded for it before the move (NULL when none was).
CREATE OR REPLACE FUNCTION pgbus.event_dead_letter(
    queue text, msg_id bigint, error jsonb, record_stats boolean DEFAULT true
) RETURNS TABLE (moved boolean, last_error text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT f.error_class INTO last_error FROM pgbus.job_failures f
    WHERE f.queue_name = queue AND f.msg_id = event_dead_letter.msg_id;
    moved := pgbus.dead_letter(queue, msg_id, error, record_stats);
    RETURN NEXT;
END;
$$;

-- Forgets processed events claimed before `older_than` ago; answers how many rows went.
CREATE OR REPLACE FUNCTION pgbus.cleanup_processed_events(older_than interval)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    DELETE FROM pgbus.processed_events p WHERE p.claimed_at < now() - older_than;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$$;

-- A consumer's read: up to `qty` visible messages from `queues` in order, each hidden for
-- `vt_seconds`, with their PGMQ headers. Queues that do not exist yet, or are paused, are
-- passed over. (The same columns as pgbus.read_jobs, then headers.)
CREATE OR REPLACE FUNCTION pgbus.read_events(queues text[], vt_seconds integer, qty integer)
RETURNS TABLE (queue text, msg_id bigint, read_ct integer, enqueued_at timestamptz,
               message jsonb, context jsonb, headers jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    r record;
    remaining integer := qty;
BEGIN
    IF vt_seconds IS NULL OR vt_seconds < 1 OR qty IS NULL OR qty < 0 THEN
        RAISE EXCEPTION 'pgbus: read_events needs vt_seconds >= 1 and qty >= 0'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH q IN ARRAY coalesce(queues, '{}') LOOP
        EXIT WHEN remaining <= 0;
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = q);
        CONTINUE WHEN EXISTS (SELECT 1 FROM pgbus.queue_pauses p WHERE p.queue_name = q);
        FOR r IN SELECT * FROM pgmq.read(q, vt_seconds, remaining) LOOP
            remaining := remaining - 1;
            queue := q;
            msg_id := r.msg_id;
            read_ct := r.read_ct;
            enqueued_at := r.enqueued_at;
            message := r.message;
            context := NULL;
            headers := r.headers;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END;
$$;

-- What the event bus holds, for the MCP server (and any reader): every binding, every bound
-- queue's pending and dead events (counted up to count_limit), the processed-events claims,
-- and the newest `recent` pending events, dead events and claims. Payloads, headers and errors
-- are included: a reader that must not show them redacts them.
CREATE OR REPLACE FUNCTION pgbus.event_overview(recent integer DEFAULT 25, count_limit integer DEFAULT 10000)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q text;
    dlq text;
    n_pending bigint;
    n_dead bigint;
    queues jsonb := '[]';
    pending jsonb := '[]';
    dead jsonb := '[]';
    rows jsonb;
BEGIN
    IF recent IS NULL OR recent < 0 OR recent > 1000 OR count_limit IS NULL OR count_limit < 1 THEN
        RAISE EXCEPTION 'pgbus: event_overview needs 0 <= recent <= 1000 and count_limit >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR q IN SELECT DISTINCT b.queue_name FROM pgmq.topic_bindings b ORDER BY 1 LOOP
        dlq := q || '_dlq';
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM pgmq.%I LIMIT $1) s',
                       pgmq.format_table_name(q, 'q')) INTO n_pending USING count_limit;
        n_dead := 0;
        IF EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = dlq) THEN
            EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM pgmq.%I LIMIT $1) s',
                           pgmq.format_table_name(dlq, 'q')) INTO n_dead USING count_limit;
            EXECUTE format(
                'SELECT coalesce(jsonb_agg(r ORDER BY r.msg_id DESC), ''[]'') FROM ('
                ' SELECT %L AS queue, msg_id, read_ct, enqueued_at, message ->> ''routing_key'' AS routing_key,'
                '        message ->> ''event_id'' AS event_id, message -> ''payload'' AS payload,'
                '        headers -> ''pgbus_dead_letter'' -> ''error'' ->> ''class'' AS error_class'
                ' FROM pgmq.%I ORDER BY msg_id DESC LIMIT $1) r', dlq, pgmq.format_table_name(dlq, 'q'))
                INTO rows USING recent;
            dead := dead || rows;
        END IF;
        EXECUTE format(
            'SELECT coalesce(jsonb_agg(r ORDER BY r.msg_id DESC), ''[]'') FROM ('
            ' SELECT %L AS queue, msg_id, read_ct, enqueued_at, vt, message ->> ''routing_key'' AS routing_key,'
            '        message ->> ''event_id'' AS event_id, message -> ''payload'' AS payload, headers'
            ' FROM pgmq.%I ORDER BY msg_id DESC LIMIT $1) r', q, pgmq.format_table_name(q, 'q'))
            INTO rows USING recent;
        pending := pending || rows;
        queues := queues || jsonb_build_object(
            'queue', q, 'pending', n_pending, 'dead', n_dead,
            'counts_capped', n_pending >= count_limit OR n_dead >= count_limit);
    END LOOP;
    RETURN jsonb_build_object(
        'subscribers', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                   'pattern', b.pattern, 'queue', b.queue_name, 'bound_at', b.bound_at)
                               ORDER BY b.queue_name, b.pattern), '[]')
                        FROM pgmq.topic_bindings b),
        'queues', queues,
        'pending', (SELECT coalesce(jsonb_agg(e ORDER BY (e ->> 'enqueued_at')::timestamptz DESC), '[]')
                    FROM (SELECT e FROM jsonb_array_elements(pending) e
                          ORDER BY (e ->> 'enqueued_at')::timestamptz DESC LIMIT recent) s),
        'dead', (SELECT coalesce(jsonb_agg(e ORDER BY (e ->> 'enqueued_at')::timestamptz DESC), '[]')
                 FROM (SELECT e FROM jsonb_array_elements(dead) e
                       ORDER BY (e ->> 'enqueued_at')::timestamptz DESC LIMIT recent) s),
        'processed', jsonb_build_object(
            'claimed', (SELECT count(*) FROM pgbus.processed_events),
            'completed', (SELECT count(*) FROM pgbus.processed_events p WHERE p.completed_at IS NOT NULL),
            'recent', (SELECT coalesce(jsonb_agg(p ORDER BY p.claimed_at DESC), '[]')
                       FROM (SELECT event_id, handler, claimed_at, completed_at FROM pgbus.processed_events
                             ORDER BY claimed_at DESC LIMIT recent) p)));
END;
$$;
