-- Operator actions on events (for the dashboard's Events page and any SQL caller), beside the
-- generic ones of 150_operator_actions.sql (discard: pgbus.message_discard /
-- pgbus.messages_discard; a dead event back to its queue: pgbus.dead_letter_retry). Each is
-- one transaction under the message's row lock, answers {ok, code, message, ...} (a refusal
-- is an answer) and records one pgbus.operator_actions row with the actor.

-- Why an action may not change this event message (locked here: the caller locks it again,
-- which it already holds): NULL when it may (an event, still there, not being handled now).
CREATE OR REPLACE FUNCTION pgbus.event_action_refusal(queue text, msg_id bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
BEGIN
    IF NOT pgbus.queue_exists(queue) THEN
        RETURN pgbus.no_such_queue(queue);
    END IF;
    m := pgbus.lock_message(queue, msg_id);
    IF m.msg_id IS NULL THEN
        RETURN pgbus.answer(false, 'gone', 'Not done: the event is no longer in the queue');
    ELSIF jsonb_typeof(m.message) IS DISTINCT FROM 'object' OR NOT (m.message ? 'event_id') THEN
        RETURN pgbus.answer(false, 'not_an_event', 'Not done: this message is not an event');
    ELSIF queue NOT LIKE '%\_dlq' AND m.read_ct > 0 AND m.vt > now()
          AND NOT EXISTS (SELECT 1 FROM pgbus.job_failures f
                          WHERE f.queue_name = queue AND f.msg_id = event_action_refusal.msg_id) THEN
        RETURN pgbus.answer(false, 'running', 'Not done: a consumer is handling it now');
    END IF;
    RETURN NULL;
END;
$$;

-- Replay: publish the event's payload again under its routing key (a new event id, to every
-- subscriber bound now). The event itself stays where it is.
CREATE OR REPLACE FUNCTION pgbus.event_replay(queue text, msg_id bigint, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    refusal jsonb;
    p record;
    outcome jsonb;
BEGIN
    refusal := pgbus.event_action_refusal(queue, msg_id);
    IF pgbus.queue_exists(queue) THEN
        m := pgbus.lock_message(queue, msg_id);
    END IF;
    IF refusal IS NOT NULL AND refusal ->> 'code' <> 'running' THEN
        outcome := refusal;
    ELSIF coalesce(m.message ->> 'routing_key', '') = '' THEN
        outcome := pgbus.answer(false, 'no_routing_key', 'Not done: the event has no routing key');
    ELSE
        SELECT * INTO p FROM pgbus.publish(m.message ->> 'routing_key', m.message -> 'payload', m.headers);
        outcome := pgbus.answer(true, 'replayed',
                                'Published again under ' || (m.message ->> 'routing_key') || ' to '
                                || p.deliveries || ' queue(s)',
                                jsonb_build_object('event_id', p.event_id, 'deliveries', p.deliveries));
    END IF;
    RETURN pgbus.operator_record(actor, 'event_replay',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id), outcome);
END;
$$;

-- Mark handled: each of `handlers` is recorded as having finished the event (so an idempotent
-- handler skips it if it comes again), and the message is archived.
CREATE OR REPLACE FUNCTION pgbus.event_mark_handled(queue text, msg_id bigint, handlers text[], actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    refusal jsonb;
    outcome jsonb;
BEGIN
    refusal := pgbus.event_action_refusal(queue, msg_id);
    IF pgbus.queue_exists(queue) THEN
        m := pgbus.lock_message(queue, msg_id);
    END IF;
    IF refusal IS NOT NULL THEN
        outcome := refusal;
    ELSE
        INSERT INTO pgbus.processed_events AS p (event_id, handler, completed_at)
        SELECT (m.message ->> 'event_id')::uuid, h, now()
        FROM unnest(coalesce(handlers, '{}')) h WHERE btrim(h) <> ''
        ON CONFLICT ON CONSTRAINT processed_events_pkey DO UPDATE SET completed_at = now();
        PERFORM pgmq.archive(queue, msg_id);
        DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = event_mark_handled.msg_id;
        outcome := pgbus.answer(true, 'handled', 'Event ' || (m.message ->> 'event_id')
                                || ' marked handled and archived');
    END IF;
    RETURN pgbus.operator_record(actor, 'event_mark_handled',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id, 'handlers', handlers),
                                 outcome);
END;
$$;

-- Edit payload: the event with `payload` (a JSON object) instead of its own, same id and
-- routing key, sent to the same queue (visible now) while the old message is deleted.
CREATE OR REPLACE FUNCTION pgbus.event_edit_payload(queue text, msg_id bigint, payload jsonb, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    refusal jsonb;
    outcome jsonb;
    new_id bigint;
BEGIN
    IF jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        outcome := pgbus.answer(false, 'invalid_payload', 'Not done: the payload must be a JSON object');
    ELSE
        refusal := pgbus.event_action_refusal(queue, msg_id);
    IF pgbus.queue_exists(queue) THEN
        m := pgbus.lock_message(queue, msg_id);
    END IF;
        IF refusal IS NOT NULL THEN
            outcome := refusal;
        ELSE
            new_id := pgmq.send(queue, jsonb_set(m.message, '{payload}', payload), m.headers);
            PERFORM pgmq.delete(queue, msg_id);
            DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = event_edit_payload.msg_id;
            outcome := pgbus.answer(true, 'edited', 'Payload replaced: the event is message ' || new_id
                                    || ' of ' || queue, jsonb_build_object('msg_id', new_id));
        END IF;
    END IF;
    RETURN pgbus.operator_record(actor, 'event_edit_payload',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id), outcome);
END;
$$;

-- Reroute: the event moves to another subscriber's queue (one bound by a pattern).
CREATE OR REPLACE FUNCTION pgbus.event_reroute(queue text, msg_id bigint, target text, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    refusal jsonb;
    outcome jsonb;
    new_id bigint;
BEGIN
    IF target IS NULL OR NOT EXISTS (SELECT 1 FROM pgmq.topic_bindings b WHERE b.queue_name = target) THEN
        outcome := pgbus.answer(false, 'not_a_subscriber',
                                'Not done: ' || coalesce(target, '(none)') || ' is no subscriber''s queue');
    ELSIF target = queue THEN
        outcome := pgbus.answer(false, 'same_queue', 'Not done: the event is in that queue already');
    ELSE
        refusal := pgbus.event_action_refusal(queue, msg_id);
    IF pgbus.queue_exists(queue) THEN
        m := pgbus.lock_message(queue, msg_id);
    END IF;
        IF refusal IS NOT NULL THEN
            outcome := refusal;
        ELSE
            new_id := pgmq.send(target, m.message, m.headers);
            PERFORM pgmq.delete(queue, msg_id);
            DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = event_reroute.msg_id;
            outcome := pgbus.answer(true, 'rerouted', 'The event is message ' || new_id || ' of ' || target,
                                    jsonb_build_object('queue', target, 'msg_id', new_id));
        END IF;
    END IF;
    RETURN pgbus.operator_record(actor, 'event_reroute',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id, 'target', target), outcome);
END;
$$;
