-- The keyset cursor of pgbus.messages_across at a numbered page: the (enqueued_at, queue_name,
-- msg_id) of the message `skip` rows into the same newest-first list of the same queues (dead
-- letters or not, one queue or all), so a caller that pages by number (the MCP tools) lands on
-- message skip + 1 by passing it as before_at/before_queue/before_id, after reading only those
-- three columns instead of every earlier message. No row when skip < 1 or fewer messages wait.
CREATE OR REPLACE FUNCTION pgbus.messages_cursor(
    dead_letters boolean, only_queue text DEFAULT NULL, skip integer DEFAULT 0
) RETURNS TABLE (before_at timestamptz, before_queue text, before_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    parts text;
BEGIN
    IF skip IS NULL OR skip < 1 THEN
        RETURN;
    END IF;
    SELECT string_agg(format(
               '(SELECT enqueued_at, %1$L::text AS queue_name, msg_id FROM pgmq.%2$I'
               ' ORDER BY msg_id DESC LIMIT $1)', x.queue_name, pgmq.format_table_name(x.queue_name, 'q')),
           ' UNION ALL ' ORDER BY x.queue_name)
        INTO parts
        FROM pgmq.meta x
        WHERE (x.queue_name LIKE '%\_dlq') = dead_letters
          AND (only_queue IS NULL OR x.queue_name = only_queue);
    IF parts IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT u.enqueued_at, u.queue_name, u.msg_id FROM (' || parts || ') u'
        ' ORDER BY u.enqueued_at DESC, u.queue_name DESC, u.msg_id DESC OFFSET $1 - 1 LIMIT 1'
        USING skip;
END;
$$;
