-- Operator actions (the dashboard's buttons, the MCP server's write tools). Each is one
-- transaction and answers {ok, code, message, ...}: a refusal ("the message is no longer in
-- the queue") is an answer, never an error. Every call writes one row of
-- pgbus.operator_actions with the actor ("dashboard:alice") and the answer.
--
-- The building blocks (retry_message, discard_message, retry_dead_letter) answer without
-- writing the audit row; the operator functions (message_retry, ...) call them and record it.

CREATE OR REPLACE FUNCTION pgbus.answer(ok boolean, code text, message text, extra jsonb DEFAULT '{}')
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('ok', ok, 'code', code, 'message', message) || coalesce(extra, '{}')
$$;

-- Records the action and returns its answer.
CREATE OR REPLACE FUNCTION pgbus.operator_record(actor text, action text, target jsonb, outcome jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    IF actor IS NULL OR btrim(actor) = '' THEN
        RAISE EXCEPTION 'pgbus: an operator action needs an actor' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO pgbus.operator_actions (actor, action, target, outcome)
    VALUES (left(actor, 200), action, coalesce(target, '{}'), outcome);
    RETURN outcome;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.queue_exists(queue text)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = queue)
$$;

CREATE OR REPLACE FUNCTION pgbus.no_such_queue(queue text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT pgbus.answer(false, 'not_found', 'Not done: there is no queue ' || coalesce(queue, '(none)'))
$$;

-- The single-message building blocks --------------------------------------------------------

-- Makes a message visible now: a failed job's next attempt, or a scheduled job, runs as soon
-- as a worker is free. A dead letter goes back to its origin queue instead.
CREATE OR REPLACE FUNCTION pgbus.retry_message(queue text, id bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    failed boolean;
BEGIN
    IF NOT pgbus.queue_exists(queue) THEN
        RETURN pgbus.no_such_queue(queue);
    END IF;
    IF queue LIKE '%\_dlq' THEN
        RETURN pgbus.retry_dead_letter(queue, id);
    END IF;
    m := pgbus.lock_message(queue, id);
    IF m.msg_id IS NULL THEN
        RETURN pgbus.answer(false, 'gone', 'Not done: the message is no longer in the queue');
    END IF;
    IF m.message ->> 'job_class' = pgbus.step_job_class() THEN
        RETURN pgbus.answer(false, 'workflow_step',
                            'Not done: this message is a workflow step; act on its run instead');
    END IF;
    IF m.vt <= now() THEN
        RETURN pgbus.answer(false, 'already_due', 'Not done: it is already waiting for a worker');
    END IF;
    failed := EXISTS (SELECT 1 FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = id);
    IF m.read_ct > 0 AND NOT failed THEN
        RETURN pgbus.answer(false, 'running', 'Not done: a worker is running it now');
    END IF;
    PERFORM pgmq.set_vt(queue, id, 0);
    RETURN pgbus.answer(true, 'retried', 'Message ' || id || ' of ' || queue
                                         || ' runs as soon as a worker is free',
                        jsonb_build_object('queue', queue, 'msg_id', id));
END;
$$;

-- Removes a message (archived, so it stays inspectable in PGMQ's archive table); a batch
-- member counts as discarded. A message a worker is running right now is left alone.
CREATE OR REPLACE FUNCTION pgbus.discard_message(queue text, id bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    dead boolean := queue LIKE '%\_dlq';
BEGIN
    IF NOT pgbus.queue_exists(queue) THEN
        RETURN pgbus.no_such_queue(queue);
    END IF;
    m := pgbus.lock_message(queue, id);
    IF m.msg_id IS NULL THEN
        RETURN pgbus.answer(false, 'gone', CASE WHEN dead
            THEN 'Not done: the dead letter is no longer there (retried or discarded already)'
            ELSE 'Not done: the message is no longer in the queue' END);
    END IF;
    IF NOT dead AND m.message ->> 'job_class' = pgbus.step_job_class() THEN
        RETURN pgbus.answer(false, 'workflow_step',
                            'Not done: this message is a workflow step; cancel its run instead');
    END IF;
    IF NOT dead AND m.read_ct > 0 AND m.vt > now()
       AND NOT EXISTS (SELECT 1 FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = id) THEN
        RETURN pgbus.answer(false, 'running', 'Not done: a worker is running it now');
    END IF;
    PERFORM pgmq.archive(queue, id);
    DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = id;
    -- A dead letter was already counted as discarded in its batch when it was dead-lettered.
    IF NOT dead AND m.message ? 'batch_id' THEN
        PERFORM pgbus.batch_member_done((m.message ->> 'batch_id')::uuid, 'discarded');
    END IF;
    RETURN pgbus.answer(true, 'discarded', 'Discarded message ' || id || ' of ' || queue,
                        jsonb_build_object('queue', queue, 'msg_id', id));
END;
$$;

-- Puts a dead letter back on its origin queue and removes it from the dead-letter queue, in
-- one transaction. A batch member becomes pending again while its batch is unfinished; once
-- the batch has finished (its callbacks ran), the message goes back without its batch.
CREATE OR REPLACE FUNCTION pgbus.retry_dead_letter(queue text, id bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    origin text;
    body jsonb;
    new_id bigint;
BEGIN
    IF queue IS NULL OR queue NOT LIKE '%\_dlq' OR NOT pgbus.queue_exists(queue) THEN
        RETURN pgbus.answer(false, 'not_found', 'Not done: there is no dead-letter queue ' || coalesce(queue, '(none)'));
    END IF;
    m := pgbus.lock_message(queue, id);
    IF m.msg_id IS NULL THEN
        RETURN pgbus.answer(false, 'gone',
                            'Not done: the dead letter is no longer there (retried or discarded already)');
    END IF;
    IF m.message ->> 'job_class' = pgbus.step_job_class() THEN
        RETURN pgbus.answer(false, 'workflow_step',
                            'Not done: this dead letter is a workflow step; retry its run from the workflow instead');
    END IF;
    origin := m.headers -> 'pgbus_dead_letter' ->> 'queue';
    IF origin IS NULL OR NOT pgbus.valid_queue_name(origin) OR origin LIKE '%\_dlq' THEN
        origin := left(queue, -4);
    END IF;
    body := m.message;
    IF body ? 'batch_id' THEN
        UPDATE pgbus.batches b SET discarded_jobs = b.discarded_jobs - 1
        WHERE b.batch_id = (body ->> 'batch_id')::uuid AND b.status <> 'finished' AND b.discarded_jobs > 0;
        IF NOT FOUND THEN
            body := body - 'batch_id';
        END IF;
    END IF;
    PERFORM pgbus.ensure_queue(origin);
    new_id := pgmq.send(origin, body,
                        (coalesce(m.headers, '{}') - 'pgbus_dead_letter')
                        || jsonb_build_object('pgbus_retried_from', jsonb_build_object(
                               'queue', queue, 'msg_id', id, 'at', now())));
    PERFORM pgmq.delete(queue, id);
    RETURN pgbus.answer(true, 'retried', 'Dead letter ' || id || ' went back to ' || origin
                                         || ' as message ' || new_id,
                        jsonb_build_object('queue', origin, 'msg_id', new_id));
END;
$$;

-- Applies one building block ('retry', 'discard', 'retry_dead_letter') to many messages
-- ([{"queue": ..., "msg_id": ...}], at most `max_items`), in queue and id order so that two
-- bulk actions never wait on each other in a cycle. Counts what was done, what had already
-- gone, and what was refused for another reason.
CREATE OR REPLACE FUNCTION pgbus.apply_to_messages(kind text, items jsonb, max_items integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    it record;
    a jsonb;
    done integer := 0;
    gone integer := 0;
    refused integer := 0;
    verb text := CASE kind WHEN 'discard' THEN 'Discarded' ELSE 'Retried' END;
BEGIN
    IF jsonb_typeof(items) IS DISTINCT FROM 'array' THEN
        RETURN pgbus.answer(false, 'invalid', 'Not done: nothing was selected');
    END IF;
    IF jsonb_array_length(items) > max_items THEN
        RETURN pgbus.answer(false, 'too_many', 'Not done: at most ' || max_items || ' at once');
    END IF;
    FOR it IN
        SELECT DISTINCT x.queue, x.msg_id
        FROM jsonb_to_recordset(items) AS x(queue text, msg_id bigint)
        ORDER BY 1, 2
    LOOP
        a := CASE kind
                 WHEN 'retry' THEN pgbus.retry_message(it.queue, it.msg_id)
                 WHEN 'discard' THEN pgbus.discard_message(it.queue, it.msg_id)
                 WHEN 'retry_dead_letter' THEN pgbus.retry_dead_letter(it.queue, it.msg_id)
             END;
        IF (a ->> 'ok')::boolean THEN
            done := done + 1;
        ELSIF a ->> 'code' IN ('gone', 'not_found') THEN
            gone := gone + 1;
        ELSE
            refused := refused + 1;
        END IF;
    END LOOP;
    RETURN pgbus.answer(done > 0, CASE WHEN done > 0 THEN 'done' ELSE 'nothing_done' END,
                        verb || ' ' || done
                        || CASE WHEN gone > 0 THEN '; ' || gone || ' had already gone' ELSE '' END
                        || CASE WHEN refused > 0 THEN '; ' || refused || ' refused (running now, workflow steps or already due)' ELSE '' END,
                        jsonb_build_object('done', done, 'gone', gone, 'refused', refused));
END;
$$;

-- The messages a bulk "all" action takes: up to `max_items` ids, oldest first, from the queues
-- chosen (dead-letter queues or the others; one queue when given), visible ones only unless
-- `any_state`. Rows another session holds are skipped.
CREATE OR REPLACE FUNCTION pgbus.pick_messages(dead_letters boolean, only_queue text, max_items integer, any_state boolean)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    picked jsonb := '[]';
    got jsonb;
BEGIN
    FOR q IN SELECT m.queue_name FROM pgmq.meta m
             WHERE (m.queue_name LIKE '%\_dlq') = dead_letters
               AND (only_queue IS NULL OR m.queue_name = only_queue)
             ORDER BY 1
    LOOP
        EXIT WHEN jsonb_array_length(picked) >= max_items;
        EXECUTE format(
            'SELECT coalesce(jsonb_agg(jsonb_build_object(''queue'', %L::text, ''msg_id'', msg_id)), ''[]'')'
            ' FROM (SELECT msg_id FROM pgmq.%I WHERE ($2 OR vt <= now())'
            '       AND message ->> ''job_class'' IS DISTINCT FROM $3'
            '       ORDER BY msg_id LIMIT $1 FOR UPDATE SKIP LOCKED) x',
            q, pgmq.format_table_name(q, 'q'))
            INTO got USING max_items - jsonb_array_length(picked), any_state, pgbus.step_job_class();
        picked := picked || got;
    END LOOP;
    RETURN picked;
END;
$$;

-- Queue operations ----------------------------------------------------------------------------

-- Removes every message of a queue (not workflow steps: a queue holding some is refused),
-- counting batch members as discarded; the messages are deleted, not archived.
CREATE OR REPLACE FUNCTION pgbus.empty_queue(queue text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    tbl text := pgmq.format_table_name(queue, 'q');
    n bigint;
    counts jsonb;
    k text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgbus.queue'), hashtext(queue));
    EXECUTE format('LOCK TABLE pgmq.%I IN SHARE ROW EXCLUSIVE MODE', tbl);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgmq.%I WHERE message ->> ''job_class'' = $1)', tbl)
        INTO STRICT k USING pgbus.step_job_class();
    IF k::boolean AND queue NOT LIKE '%\_dlq' THEN
        RETURN pgbus.answer(false, 'workflow_steps',
                            'Not done: ' || queue || ' holds workflow steps; cancel their runs instead');
    END IF;
    EXECUTE format(
        'WITH gone AS (DELETE FROM pgmq.%I RETURNING message ->> ''batch_id'' AS b)'
        ' SELECT (SELECT count(*) FROM gone),'
        '        (SELECT coalesce(jsonb_object_agg(b, n), ''{}'') FROM'
        '           (SELECT b, count(*) AS n FROM gone WHERE b IS NOT NULL GROUP BY b ORDER BY b) x)', tbl)
        INTO n, counts;
    IF queue NOT LIKE '%\_dlq' THEN
        FOR k IN SELECT jsonb_object_keys(counts) ORDER BY 1 LOOP
            PERFORM pgbus.batch_member_done(k::uuid, 'discarded', (counts ->> k)::integer);
        END LOOP;
    END IF;
    DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue;
    RETURN pgbus.answer(true, 'purged', 'Purged ' || queue || ': ' || n || ' message(s) removed',
                        jsonb_build_object('removed', n));
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.queue_pause(queue text, reason text, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    target jsonb := jsonb_build_object('queue', queue);
BEGIN
    IF NOT pgbus.queue_exists(queue) THEN
        RETURN pgbus.operator_record(actor, 'queue_pause', target, pgbus.no_such_queue(queue));
    END IF;
    INSERT INTO pgbus.queue_pauses (queue_name, reason, paused_by)
    VALUES (queue, nullif(btrim(left(reason, 500)), ''), actor)
    ON CONFLICT (queue_name) DO NOTHING;
    IF NOT FOUND THEN
        RETURN pgbus.operator_record(actor, 'queue_pause', target,
            pgbus.answer(false, 'already_paused', 'Not done: ' || queue || ' was already paused'));
    END IF;
    RETURN pgbus.operator_record(actor, 'queue_pause', target,
        pgbus.answer(true, 'paused', 'Paused ' || queue || ': workers leave its messages until it is resumed'));
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.queue_resume(queue text, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    target jsonb := jsonb_build_object('queue', queue);
BEGIN
    DELETE FROM pgbus.queue_pauses p WHERE p.queue_name = queue;
    IF NOT FOUND THEN
        RETURN pgbus.operator_record(actor, 'queue_resume', target,
            CASE WHEN pgbus.queue_exists(queue)
                 THEN pgbus.answer(false, 'not_paused', 'Not done: ' || queue || ' was not paused')
                 ELSE pgbus.no_such_queue(queue) END);
    END IF;
    RETURN pgbus.operator_record(actor, 'queue_resume', target,
        pgbus.answer(true, 'resumed', 'Resumed ' || queue));
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.queue_purge(queue text, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgbus.operator_record(actor, 'queue_purge', jsonb_build_object('queue', queue),
        CASE WHEN pgbus.queue_exists(queue) THEN pgbus.empty_queue(queue)
             ELSE pgbus.no_such_queue(queue) END);
END;
$$;

-- Deletes a queue: its messages (as a purge does), its archive and its pause.
CREATE OR REPLACE FUNCTION pgbus.queue_delete(queue text, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    a jsonb;
BEGIN
    IF NOT pgbus.queue_exists(queue) THEN
        RETURN pgbus.operator_record(actor, 'queue_delete', jsonb_build_object('queue', queue),
                                     pgbus.no_such_queue(queue));
    END IF;
    a := pgbus.empty_queue(queue);
    IF NOT (a ->> 'ok')::boolean THEN
        RETURN pgbus.operator_record(actor, 'queue_delete', jsonb_build_object('queue', queue), a);
    END IF;
    PERFORM pgmq.drop_queue(queue);
    DELETE FROM pgbus.queue_pauses p WHERE p.queue_name = queue;
    BEGIN
        PERFORM pgbus.queue_functions_refresh();
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;  -- as in ensure_queue: the statements are rebuilt on the next migrate
    END;
    RETURN pgbus.operator_record(actor, 'queue_delete', jsonb_build_object('queue', queue),
        pgbus.answer(true, 'deleted', 'Deleted ' || queue || ' (' || (a ->> 'removed') || ' message(s) removed)',
                     jsonb_build_object('removed', (a ->> 'removed')::bigint)));
END;
$$;

-- Message operations (operator-facing, audited) ---------------------------------------------

CREATE OR REPLACE FUNCTION pgbus.message_retry(queue text, msg_id bigint, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'message_retry',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id),
                                 pgbus.retry_message(queue, msg_id))
$$;

CREATE OR REPLACE FUNCTION pgbus.message_discard(queue text, msg_id bigint, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'message_discard',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id),
                                 pgbus.discard_message(queue, msg_id))
$$;

CREATE OR REPLACE FUNCTION pgbus.dead_letter_retry(queue text, msg_id bigint, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'dead_letter_retry',
                                 jsonb_build_object('queue', queue, 'msg_id', msg_id),
                                 pgbus.retry_dead_letter(queue, msg_id))
$$;

CREATE OR REPLACE FUNCTION pgbus.messages_retry(items jsonb, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'messages_retry', jsonb_build_object('items', items),
                                 pgbus.apply_to_messages('retry', items))
$$;

CREATE OR REPLACE FUNCTION pgbus.messages_discard(items jsonb, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'messages_discard', jsonb_build_object('items', items),
                                 pgbus.apply_to_messages('discard', items))
$$;

CREATE OR REPLACE FUNCTION pgbus.dead_letters_retry(items jsonb, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'dead_letters_retry', jsonb_build_object('items', items),
                                 pgbus.apply_to_messages('retry_dead_letter', items))
$$;

-- Discards up to max_items jobs waiting in a queue (every queue but dead-letter ones when
-- queue is NULL); a second press takes the next ones.
CREATE OR REPLACE FUNCTION pgbus.jobs_discard_enqueued(queue text, max_items integer, actor text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    IF queue IS NOT NULL AND (NOT pgbus.queue_exists(queue) OR queue LIKE '%\_dlq') THEN
        RETURN pgbus.operator_record(actor, 'jobs_discard_enqueued', jsonb_build_object('queue', queue),
                                     pgbus.no_such_queue(queue));
    END IF;
    RETURN pgbus.operator_record(actor, 'jobs_discard_enqueued',
        jsonb_build_object('queue', queue, 'max_items', max_items),
        pgbus.apply_to_messages('discard',
            pgbus.pick_messages(false, queue, least(greatest(coalesce(max_items, 1000), 1), 1000), false)));
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.dead_letters_retry_all(max_items integer, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'dead_letters_retry_all', jsonb_build_object('max_items', max_items),
        pgbus.apply_to_messages('retry_dead_letter',
            pgbus.pick_messages(true, NULL, least(greatest(coalesce(max_items, 1000), 1), 1000), true)))
$$;

CREATE OR REPLACE FUNCTION pgbus.dead_letters_discard_all(max_items integer, actor text)
RETURNS jsonb
LANGUAGE sql AS $$
    SELECT pgbus.operator_record(actor, 'dead_letters_discard_all', jsonb_build_object('max_items', max_items),
        pgbus.apply_to_messages('discard',
            pgbus.pick_messages(true, NULL, least(greatest(coalesce(max_items, 1000), 1), 1000), true)))
$$;

-- The dispatcher's duty (or pg_cron's): operator actions older than `older_than` are deleted.
CREATE OR REPLACE FUNCTION pgbus.cleanup_operator_actions(older_than interval DEFAULT interval '90 days')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM pgbus.operator_actions WHERE at < now() - older_than RETURNING 1)
    SELECT count(*)::integer FROM gone
$$;
