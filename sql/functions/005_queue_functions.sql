-- One message's send, read and archive, with plans kept for the session.
--
-- PGMQ's own functions build their statement's text on every call, so PostgreSQL parses and
-- plans it every time: on a workflow step that was a sixth of the database's work. These three
-- write their statement out once per queue, so PL/pgSQL plans it once per session:
--
--   pgbus.queue_send(queue_name, body, visible_at) -> msg_id
--   pgbus.queue_read(queue_name, vt_seconds, qty)  -> SETOF pgmq.message_record
--   pgbus.queue_archive(queue_name, id)            -> whether it was there
--
-- pgbus.queue_functions_refresh() writes them from pgmq.meta; pgbus.ensure_queue calls it
-- after creating a queue, and `pgbus db migrate` after applying this file. A queue created in
-- another way since runs the same statement, built and planned on each call.
--
-- A read takes the messages that became visible first (by vt, through PGMQ's index on it)
-- rather than the lowest ids: with a million delayed messages in a queue (steps waiting for
-- days) it reads the few that are due instead of walking past all the others.
-- A read and an archive never scan the queue's table (enable_seqscan is off inside them): a
-- session keeps the plan it made while its queue was empty, where a scan of the one page was
-- the cheapest, and with that plan every read of a later burst walked the whole queue twice,
-- and every archive once, until autovacuum next looked at the table. Through the indexes, a
-- nearly empty queue costs a page or two more.
-- The hot paths (enqueueing one job, reading, a workflow step's send and archive) use these;
-- the rarer bulk and maintenance paths call PGMQ's functions.

-- Writes the function `header` declares (signature, language, declarations, up to its opening
-- "$fn$"). Its body picks by queue_name: for each queue of pgmq.meta, `statement` (a format()
-- string: %1$I the queue's table, %2$I its archive table; $1, $2, ... the function's
-- arguments) written out for that queue and run by `run` (a format() string around it, such
-- as 'RETURN QUERY %s;'); for any other queue, the same statement built then, run by `run_built`
-- (around the expression that builds it, such as 'RETURN QUERY EXECUTE %s USING ...;').
CREATE OR REPLACE FUNCTION pgbus.queue_function_define(
    header text, statement text, run text, run_built text
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    built text := format(run_built, format(
        'format(%L, pgmq.format_table_name(queue_name, %L), pgmq.format_table_name(queue_name, %L))',
        statement, 'q', 'a'));
    branches text;
    body text;
BEGIN
    SELECT string_agg(format(E'WHEN %L THEN\n    %s', m.queue_name,
                             replace(format(run, format(statement, pgmq.format_table_name(m.queue_name, 'q'),
                                                        pgmq.format_table_name(m.queue_name, 'a'))),
                                     E'\n', E'\n    ')),
                      E'\n' ORDER BY m.queue_name)
    INTO branches
    FROM pgmq.meta m;
    body := CASE WHEN branches IS NULL THEN built
                 ELSE format(E'CASE queue_name\n    %s\nELSE\n    %s\nEND CASE;',
                             replace(branches, E'\n', E'\n    '), built) END;
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
        'INSERT INTO pgmq.%1$I (vt, message) VALUES ($3, $2) RETURNING msg_id',
        E'%s INTO id;\nRETURN id;',
        E'EXECUTE %s INTO id USING queue_name, body, visible_at;\nRETURN id;');
    PERFORM pgbus.queue_function_define(
        $h$pgbus.queue_read(queue_name text, vt_seconds integer, qty integer)
RETURNS SETOF pgmq.message_record LANGUAGE plpgsql SET enable_seqscan = off AS $fn$$h$,
        -- ("(SELECT clock_timestamp())" is taken once, so the index can use it; clock_timestamp()
        -- itself would be a filter on every row.)
        $s$WITH due AS (
    SELECT d.msg_id FROM pgmq.%1$I d
    WHERE d.vt <= (SELECT clock_timestamp())
    ORDER BY d.vt LIMIT $3
    FOR UPDATE SKIP LOCKED)
UPDATE pgmq.%1$I m
SET last_read_at = clock_timestamp(),
    vt = clock_timestamp() + make_interval(secs => $2),
    read_ct = m.read_ct + 1
FROM due WHERE m.msg_id = due.msg_id
RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.last_read_at, m.vt, m.message, m.headers$s$,
        'RETURN QUERY %s;',
        'RETURN QUERY EXECUTE %s USING queue_name, vt_seconds, qty;');
    PERFORM pgbus.queue_function_define(
        $h$pgbus.queue_archive(queue_name text, id bigint)
RETURNS boolean LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
DECLARE
    archived bigint;$h$,
        $s$WITH gone AS (
    DELETE FROM pgmq.%1$I q WHERE q.msg_id = $2
    RETURNING q.msg_id, q.vt, q.read_ct, q.enqueued_at, q.last_read_at, q.message, q.headers)
INSERT INTO pgmq.%2$I (msg_id, vt, read_ct, enqueued_at, last_read_at, message, headers)
SELECT * FROM gone
RETURNING msg_id$s$,
        E'%s INTO archived;\nRETURN archived IS NOT NULL;',
        E'EXECUTE %s INTO archived USING queue_name, id;\nRETURN archived IS NOT NULL;');
END;
$refresh$;

SELECT pgbus.queue_functions_refresh();
