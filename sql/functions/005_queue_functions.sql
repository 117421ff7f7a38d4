-- One message's send, read and archive, with plans kept for the session.
--
-- PGMQ's own functions build their statement's text on every call, so PostgreSQL parses and
-- plans it every time: on a workflow step that was a sixth of the database's work. These three
-- do the same with one static statement per queue, which PL/pgSQL plans once per session:
--
--   pgbus.queue_send(queue_name, body, visible_at) -> msg_id
--   pgbus.queue_read(queue_name, vt_seconds, qty)  -> SETOF pgmq.message_record
--   pgbus.queue_archive(queue_name, id)            -> whether it was there
--
-- pgbus.queue_functions_refresh() writes them from pgmq.meta; pgbus.ensure_queue calls it
-- after creating a queue, and `pgbus db migrate` after applying this file. A queue created in
-- another way since falls through to PGMQ's own function: the same result, planned each time.
-- The hot paths (enqueueing one job, reading, a workflow step's send and archive) use these;
-- the rarer bulk and maintenance paths call PGMQ directly.

-- Writes `header` (the function's signature and declarations) with a body that picks, by
-- queue_name, the statement made from `branch` (a format() string: %1$L the queue's name,
-- %2$I its table, %3$I its archive table) for each queue of pgmq.meta, or runs `fallback`.
CREATE OR REPLACE FUNCTION pgbus.queue_function_define(header text, branch text, fallback text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    branches text;
    body text;
BEGIN
    SELECT string_agg(format(branch, m.queue_name, pgmq.format_table_name(m.queue_name, 'q'),
                             pgmq.format_table_name(m.queue_name, 'a')), E'\n' ORDER BY m.queue_name)
    INTO branches
    FROM pgmq.meta m;
    body := CASE WHEN branches IS NULL THEN fallback
                 ELSE format(E'CASE queue_name\n    %s\nELSE\n    %s\nEND CASE;',
                             replace(branches, E'\n', E'\n    '), fallback) END;
    EXECUTE format(E'CREATE OR REPLACE FUNCTION %s\nBEGIN\n    %s\nEND\n$fn$',
                   header, replace(body, E'\n', E'\n    '));
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.queue_functions_refresh()
RETURNS void
LANGUAGE plpgsql AS $refresh$
BEGIN
    -- One writer at a time: two sessions replacing one function at once would fail.
    PERFORM pg_advisory_xact_lock(hashtext('pgbus.queue_functions_refresh'));
    PERFORM pgbus.queue_function_define(
        $h$pgbus.queue_send(queue_name text, body jsonb, visible_at timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    id bigint;$h$,
        $b$WHEN %1$L THEN
    INSERT INTO pgmq.%2$I (vt, message) VALUES (visible_at, body) RETURNING msg_id INTO id;
    RETURN id;$b$,
        $f$RETURN (SELECT pgmq.send(queue_name, body, NULL::jsonb, visible_at));$f$);
    PERFORM pgbus.queue_function_define(
        $h$pgbus.queue_read(queue_name text, vt_seconds integer, qty integer)
RETURNS SETOF pgmq.message_record LANGUAGE plpgsql AS $fn$$h$,
        $b$WHEN %1$L THEN
    RETURN QUERY
        WITH due AS (
            SELECT d.msg_id FROM pgmq.%2$I d
            WHERE d.vt <= clock_timestamp()
            ORDER BY d.msg_id LIMIT qty
            FOR UPDATE SKIP LOCKED)
        UPDATE pgmq.%2$I m
        SET last_read_at = clock_timestamp(),
            vt = clock_timestamp() + make_interval(secs => vt_seconds),
            read_ct = m.read_ct + 1
        FROM due WHERE m.msg_id = due.msg_id
        RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.last_read_at, m.vt, m.message, m.headers;$b$,
        $f$RETURN QUERY SELECT * FROM pgmq.read(queue_name, vt_seconds, qty);$f$);
    PERFORM pgbus.queue_function_define(
        $h$pgbus.queue_archive(queue_name text, id bigint)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    archived bigint;$h$,
        $b$WHEN %1$L THEN
    WITH gone AS (
        DELETE FROM pgmq.%2$I q WHERE q.msg_id = id
        RETURNING q.msg_id, q.vt, q.read_ct, q.enqueued_at, q.last_read_at, q.message, q.headers)
    INSERT INTO pgmq.%3$I (msg_id, vt, read_ct, enqueued_at, last_read_at, message, headers)
    SELECT * FROM gone
    RETURNING msg_id INTO archived;
    RETURN archived IS NOT NULL;$b$,
        $f$RETURN pgmq.archive(queue_name, id);$f$);
END;
$refresh$;

SELECT pgbus.queue_functions_refresh();
