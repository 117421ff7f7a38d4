-- The read layer of the dashboard and the MCP server: every number they show comes from these
-- functions (and the views in sql/views/1xx). They only read.

-- A duration in words an operator reads at a glance: "40 s", "3 min", "2 h", "5 d".
CREATE OR REPLACE FUNCTION pgbus.human_duration(seconds float8)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
               WHEN seconds IS NULL THEN NULL
               WHEN abs(seconds) < 60 THEN round(abs(seconds))::bigint || ' s'
               WHEN abs(seconds) < 3600 THEN round(abs(seconds) / 60)::bigint || ' min'
               WHEN abs(seconds) < 172800 THEN round(abs(seconds) / 3600)::bigint || ' h'
               ELSE round(abs(seconds) / 86400)::bigint || ' d'
           END
$$;

-- The PGMQ queues some live worker reads (from the workers' heartbeat metadata).
CREATE OR REPLACE FUNCTION pgbus.drained_queues(alive_within interval DEFAULT interval '5 minutes')
RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT q ORDER BY q), '{}')
    FROM pgbus.processes p
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(p.metadata -> 'queues') = 'array' THEN p.metadata -> 'queues'
             ELSE '[]'::jsonb END) AS q
    WHERE p.kind = 'worker' AND p.last_heartbeat_at > now() - alive_within
$$;

-- What happens next to a message, in one sentence ("Attempt 3 of 4 failed: ConnectionError —
-- next attempt in 40 s", "Queue paused", "No worker drains this queue", ...).
CREATE OR REPLACE FUNCTION pgbus.job_next_step(
    read_ct integer, vt timestamptz, max_attempts integer, error_class text,
    paused boolean, drained boolean
) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT concat_ws(' — ',
        CASE WHEN error_class IS NOT NULL
             THEN 'Attempt ' || read_ct || coalesce(' of ' || max_attempts, '') || ' failed: ' || error_class
        END,
        CASE
            WHEN paused THEN 'Queue paused'
            WHEN vt > now() AND error_class IS NOT NULL
                THEN 'next attempt in ' || pgbus.human_duration(extract(epoch FROM vt - now()))
            WHEN vt > now() AND read_ct = 0
                THEN 'Scheduled: runs in ' || pgbus.human_duration(extract(epoch FROM vt - now()))
            WHEN vt > now() THEN 'Running (attempt ' || read_ct || ')'
            WHEN NOT drained THEN 'No worker drains this queue'
            WHEN error_class IS NOT NULL THEN 'next attempt as soon as a worker is free'
            ELSE 'Waiting for a worker'
        END)
$$;

-- (Its earlier signatures.)
DROP FUNCTION IF EXISTS pgbus.queue_stats(text, interval);
DROP FUNCTION IF EXISTS pgbus.queue_stats(text, interval, integer);
DROP FUNCTION IF EXISTS pgbus.queue_stats(text, interval, integer, interval);

-- One row per PGMQ queue (or only `only_queue`): depth, visible, not yet visible (split into
-- scheduled: never read, not yet due; and invisible: being run, or waiting out a retry
-- backoff), never-read visible messages, the oldest message's age and the oldest claimable
-- one's (how long a visible message has waited), total ever sent, paused, and whether a live
-- worker reads it.
--
-- Counting a queue reads all of it. With `count_limit` (the pages use 1,000) a queue holding
-- more messages than that is not counted: its depth is PostgreSQL's estimate (the live-tuple
-- count of the statistics, else pg_class.reltuples), visible and not-yet-visible counts stop
-- at count_limit + 1 (read from the vt index alone), the scheduled / invisible split and
-- max_read_ct are NULL, visible_unread counts among the 100 oldest visible messages only,
-- and counts_capped says so. A queue the statistics call big is checked by index probes only.
-- Ages come from the indexes either way. Without count_limit every count is exact.
--
-- With `reuse_within` too, a big queue's capped figures (probes, ages, total ever sent) are
-- reused from pgbus.queue_figures_cache when they were counted within it, and stored there
-- when they are counted anew (unless the transaction is read-only): a page over many big
-- queues then reads one row per queue. counted_at says when a capped row's figures were
-- counted (ages are from then too); NULL for an exact row. Depth and the paused and drained
-- flags are always read now.
CREATE OR REPLACE FUNCTION pgbus.queue_stats(
    only_queue text DEFAULT NULL, alive_within interval DEFAULT interval '5 minutes',
    count_limit integer DEFAULT NULL, reuse_within interval DEFAULT NULL
) RETURNS TABLE (
    queue_name text, is_dlq boolean, depth bigint, visible bigint, not_visible bigint,
    scheduled bigint, invisible bigint, visible_unread bigint, oldest_age_seconds float8,
    oldest_claimable_age_seconds float8, max_read_ct integer, total_messages bigint,
    counts_capped boolean, paused boolean, paused_reason text, paused_by text,
    paused_at timestamptz, drained boolean, created_at timestamptz, counted_at timestamptz
)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    m record;
    tbl text;
    drainers text[] := pgbus.drained_queues(alive_within);
    lim integer := CASE WHEN count_limit IS NULL THEN NULL ELSE greatest(count_limit, 1) + 1 END;
    may_store boolean := reuse_within IS NOT NULL AND NOT pg_is_in_recovery()
                         AND current_setting('transaction_read_only') = 'off';
    probe_unread bigint;
    probe_big bigint;
    first_enqueued timestamptz;
    first_claimable timestamptz;
    c pgbus.queue_figures_cache;
BEGIN
    FOR m IN SELECT x.queue_name AS name, x.created_at AS made, p.reason AS p_reason, p.paused_by AS p_by,
                    p.paused_at AS p_at, p.queue_name IS NOT NULL AS is_paused,
                    -- The live-tuple count the statistics keep (current within a second or
                    -- so), or the planner's estimate before the statistics know the table.
                    coalesce(nullif(pg_stat_get_live_tuples(k.oid), 0),
                             greatest(k.reltuples, 0)::bigint, 0) AS estimate
             FROM (SELECT y.queue_name, y.created_at, pgmq.format_table_name(y.queue_name, 'q') AS tbl
                   FROM pgmq.meta y) x
             LEFT JOIN pgbus.queue_pauses p ON p.queue_name = x.queue_name
             LEFT JOIN pg_class k ON k.relnamespace = 'pgmq'::regnamespace AND k.relname = x.tbl
             WHERE only_queue IS NULL OR x.queue_name = only_queue ORDER BY x.queue_name
    LOOP
        tbl := pgmq.format_table_name(m.name, 'q');
        queue_name := m.name;
        created_at := m.made;
        is_dlq := m.name LIKE '%\_dlq';
        paused := m.is_paused; paused_reason := m.p_reason; paused_by := m.p_by; paused_at := m.p_at;
        drained := m.name = ANY (drainers);
        counts_capped := false;
        counted_at := NULL;
        IF lim IS NOT NULL AND m.estimate >= lim THEN
            -- A queue the statistics call big: its last capped figures when recent enough,
            -- else index probes (is there a lim-th message? a lim-th visible one?), no row
            -- counted past lim.
            c := NULL;
            IF reuse_within IS NOT NULL THEN
                SELECT * INTO c FROM pgbus.queue_figures_cache f
                WHERE f.queue_name = m.name AND f.counted_at >= clock_timestamp() - reuse_within;
            END IF;
            IF c.queue_name IS NOT NULL THEN
                probe_big := 1;
                visible := c.visible; not_visible := c.not_visible; visible_unread := c.visible_unread;
                first_enqueued := c.oldest_enqueued_at; first_claimable := c.oldest_claimable_vt;
                total_messages := c.total_messages; counted_at := c.counted_at;
            ELSE
                EXECUTE format(
                    'SELECT (SELECT msg_id FROM pgmq.%1$I ORDER BY msg_id OFFSET $1 - 1 LIMIT 1),'
                    ' CASE WHEN EXISTS (SELECT 1 FROM pgmq.%1$I WHERE vt <= now() ORDER BY vt OFFSET $1 - 1 LIMIT 1)'
                    '      THEN $1 ELSE (SELECT count(*) FROM pgmq.%1$I WHERE vt <= now()) END,'
                    ' CASE WHEN EXISTS (SELECT 1 FROM pgmq.%1$I WHERE vt > now() ORDER BY vt OFFSET $1 - 1 LIMIT 1)'
                    '      THEN $1 ELSE (SELECT count(*) FROM pgmq.%1$I WHERE vt > now()) END,'
                    ' (SELECT count(*) FILTER (WHERE read_ct = 0) FROM'
                    '    (SELECT read_ct FROM pgmq.%1$I WHERE vt <= now() ORDER BY vt LIMIT 100) x),'
                    ' (SELECT enqueued_at FROM pgmq.%1$I ORDER BY msg_id LIMIT 1),'
                    ' (SELECT vt FROM pgmq.%1$I WHERE vt <= now() ORDER BY vt LIMIT 1),'
                    ' (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pgmq.%2$I)',
                    tbl, tbl || '_msg_id_seq')
                    INTO probe_big, visible, not_visible, visible_unread, first_enqueued,
                         first_claimable, total_messages
                    USING lim;
                counted_at := clock_timestamp();
                IF probe_big IS NOT NULL AND may_store THEN
                    INSERT INTO pgbus.queue_figures_cache AS f
                        (queue_name, counted_at, visible, not_visible, visible_unread,
                         oldest_enqueued_at, oldest_claimable_vt, total_messages)
                    VALUES (m.name, counted_at, visible, not_visible, visible_unread,
                            first_enqueued, first_claimable, total_messages)
                    ON CONFLICT ON CONSTRAINT queue_figures_cache_pkey DO UPDATE
                    SET counted_at = EXCLUDED.counted_at, visible = EXCLUDED.visible,
                        not_visible = EXCLUDED.not_visible, visible_unread = EXCLUDED.visible_unread,
                        oldest_enqueued_at = EXCLUDED.oldest_enqueued_at,
                        oldest_claimable_vt = EXCLUDED.oldest_claimable_vt,
                        total_messages = EXCLUDED.total_messages;
                END IF;
            END IF;
            IF probe_big IS NOT NULL THEN
                counts_capped := true;
                depth := greatest(m.estimate, lim);
                scheduled := NULL;
                invisible := NULL;
                max_read_ct := NULL;
                oldest_age_seconds := extract(epoch FROM now() - first_enqueued)::float8;
                oldest_claimable_age_seconds := extract(epoch FROM now() - first_claimable)::float8;
            ELSE
                counted_at := NULL;  -- (smaller than the statistics said: counted below)
            END IF;
        END IF;
        IF lim IS NOT NULL AND NOT counts_capped THEN
            -- One statement: the first lim rows (all of a small queue: exact figures), then
            -- the index-only counts and ages that stand in for a big queue's.
            EXECUTE format(
                'SELECT p.n, p.sched, p.unread, p.max_read,'
                ' (SELECT count(*) FROM (SELECT 1 FROM pgmq.%1$I WHERE vt <= now() LIMIT $1) x),'
                ' (SELECT count(*) FROM (SELECT 1 FROM pgmq.%1$I WHERE vt > now() LIMIT $1) x),'
                ' (SELECT count(*) FILTER (WHERE read_ct = 0) FROM'
                '    (SELECT read_ct FROM pgmq.%1$I WHERE vt <= now() ORDER BY vt LIMIT 100) x),'
                ' extract(epoch FROM now() - (SELECT enqueued_at FROM pgmq.%1$I ORDER BY msg_id LIMIT 1))::float8,'
                ' extract(epoch FROM now() - (SELECT vt FROM pgmq.%1$I WHERE vt <= now() ORDER BY vt LIMIT 1))::float8,'
                ' (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pgmq.%2$I)'
                ' FROM (SELECT count(*) AS n, count(*) FILTER (WHERE vt > now() AND read_ct = 0) AS sched,'
                '              count(*) FILTER (WHERE vt <= now() AND read_ct = 0) AS unread,'
                '              coalesce(max(read_ct), 0) AS max_read'
                '       FROM (SELECT vt, read_ct FROM pgmq.%1$I LIMIT $1) r) p',
                tbl, tbl || '_msg_id_seq')
                INTO depth, scheduled, probe_unread, max_read_ct, visible, not_visible,
                     visible_unread, oldest_age_seconds, oldest_claimable_age_seconds,
                     total_messages
                USING lim;
            counts_capped := depth >= lim;
            IF counts_capped THEN
                depth := greatest(m.estimate, lim);
                scheduled := NULL;
                invisible := NULL;
                max_read_ct := NULL;
                counted_at := clock_timestamp();
            ELSE
                invisible := not_visible - scheduled;
                visible_unread := probe_unread;
            END IF;
        ELSIF lim IS NULL THEN
            EXECUTE format(
                'SELECT count(*), count(*) FILTER (WHERE vt <= now()),'
                ' count(*) FILTER (WHERE vt > now() AND read_ct = 0),'
                ' count(*) FILTER (WHERE vt > now() AND read_ct > 0),'
                ' count(*) FILTER (WHERE vt <= now() AND read_ct = 0),'
                ' extract(epoch FROM now() - min(enqueued_at))::float8,'
                ' extract(epoch FROM now() - min(vt) FILTER (WHERE vt <= now()))::float8,'
                ' coalesce(max(read_ct), 0),'
                ' (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pgmq.%2$I)'
                ' FROM pgmq.%1$I', tbl, tbl || '_msg_id_seq')
                INTO depth, visible, scheduled, invisible, visible_unread, oldest_age_seconds,
                     oldest_claimable_age_seconds, max_read_ct, total_messages;
            not_visible := scheduled + invisible;
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A page of one queue's messages, newest first, after the keyset cursor `before_id`
-- (the last msg_id of the previous page): the same cost on the first page and the 10,000th.
CREATE OR REPLACE FUNCTION pgbus.queue_messages(
    queue text, before_id bigint DEFAULT NULL, page_size integer DEFAULT 25,
    alive_within interval DEFAULT interval '5 minutes'
) RETURNS TABLE (
    queue_name text, msg_id bigint, read_ct integer, enqueued_at timestamptz,
    last_read_at timestamptz, vt timestamptz, message jsonb, headers jsonb, next_step text
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    is_paused boolean := EXISTS (SELECT 1 FROM pgbus.queue_pauses p WHERE p.queue_name = queue);
    is_drained boolean := queue = ANY (pgbus.drained_queues(alive_within));
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgmq.meta x WHERE x.queue_name = queue) THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT %L::text, m.msg_id, m.read_ct, m.enqueued_at, m.last_read_at, m.vt, m.message,'
        ' m.headers, pgbus.job_next_step(m.read_ct, m.vt, f.max_attempts, f.error_class, $3, $4)'
        ' FROM (SELECT * FROM pgmq.%I WHERE $1 IS NULL OR msg_id < $1'
        '       ORDER BY msg_id DESC LIMIT $2) m'
        ' LEFT JOIN pgbus.job_failures f ON f.queue_name = %L AND f.msg_id = m.msg_id'
        ' ORDER BY m.msg_id DESC', queue, pgmq.format_table_name(queue, 'q'), queue)
        USING before_id, least(greatest(coalesce(page_size, 25), 1), 500), is_paused, is_drained;
END;
$$;

-- Messages across queues (the jobs page: every queue but dead-letter ones; the dead letters
-- page: only those), newest first by (enqueued_at, queue_name, msg_id), after that cursor.
CREATE OR REPLACE FUNCTION pgbus.messages_across(
    dead_letters boolean, only_queue text DEFAULT NULL,
    before_at timestamptz DEFAULT NULL, before_queue text DEFAULT NULL, before_id bigint DEFAULT NULL,
    page_size integer DEFAULT 25, alive_within interval DEFAULT interval '5 minutes'
) RETURNS TABLE (
    queue_name text, msg_id bigint, read_ct integer, enqueued_at timestamptz,
    last_read_at timestamptz, vt timestamptz, message jsonb, headers jsonb, next_step text
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    parts text;
    n integer := least(greatest(coalesce(page_size, 25), 1), 500);
    drainers text[] := pgbus.drained_queues(alive_within);
BEGIN
    SELECT string_agg(format(
               '(SELECT %1$L::text AS queue_name, msg_id, read_ct, enqueued_at, last_read_at, vt,'
               ' message, headers FROM pgmq.%2$I'
               ' WHERE $1 IS NULL OR (enqueued_at, %1$L::text, msg_id) < ($1, $2, $3)'
               ' ORDER BY msg_id DESC LIMIT $4)', x.queue_name, pgmq.format_table_name(x.queue_name, 'q')),
           ' UNION ALL ' ORDER BY x.queue_name)
        INTO parts
        FROM pgmq.meta x
        WHERE (x.queue_name LIKE '%\_dlq') = dead_letters
          AND (only_queue IS NULL OR x.queue_name = only_queue);
    IF parts IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT u.queue_name, u.msg_id, u.read_ct, u.enqueued_at, u.last_read_at, u.vt, u.message,'
        ' u.headers, pgbus.job_next_step(u.read_ct, u.vt, f.max_attempts, f.error_class,'
        '   EXISTS (SELECT 1 FROM pgbus.queue_pauses p WHERE p.queue_name = u.queue_name),'
        '   u.queue_name = ANY ($5))'
        ' FROM (' || parts || ') u'
        ' LEFT JOIN pgbus.job_failures f ON f.queue_name = u.queue_name AND f.msg_id = u.msg_id'
        ' ORDER BY u.enqueued_at DESC, u.queue_name DESC, u.msg_id DESC LIMIT $4'
        USING before_at, coalesce(before_queue, ''), coalesce(before_id, 0), n, drainers;
END;
$$;

-- One message with its failure (if it failed and will be retried); no row when it is gone.
CREATE OR REPLACE FUNCTION pgbus.queue_message(
    queue text, id bigint, alive_within interval DEFAULT interval '5 minutes'
) RETURNS TABLE (
    queue_name text, msg_id bigint, read_ct integer, enqueued_at timestamptz,
    last_read_at timestamptz, vt timestamptz, message jsonb, headers jsonb, next_step text,
    error_class text, error_message text, backtrace text, failed_at timestamptz
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgmq.meta x WHERE x.queue_name = queue) THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT %L::text, m.msg_id, m.read_ct, m.enqueued_at, m.last_read_at, m.vt, m.message,'
        ' m.headers, pgbus.job_next_step(m.read_ct, m.vt, f.max_attempts, f.error_class,'
        '   EXISTS (SELECT 1 FROM pgbus.queue_pauses p WHERE p.queue_name = %L), $2),'
        ' f.error_class, f.error_message, f.backtrace, f.failed_at'
        ' FROM pgmq.%I m'
        ' LEFT JOIN pgbus.job_failures f ON f.queue_name = %L AND f.msg_id = m.msg_id'
        ' WHERE m.msg_id = $1', queue, queue, pgmq.format_table_name(queue, 'q'), queue)
        USING id, queue = ANY (pgbus.drained_queues(alive_within));
END;
$$;

-- Failed jobs that will be retried (pgbus.job_failures), newest failure first, after the
-- cursor (failed_at, queue_name, msg_id), with what happens next.
CREATE OR REPLACE FUNCTION pgbus.failed_jobs(
    only_queue text DEFAULT NULL, before_at timestamptz DEFAULT NULL,
    before_queue text DEFAULT NULL, before_id bigint DEFAULT NULL,
    page_size integer DEFAULT 25, alive_within interval DEFAULT interval '5 minutes'
) RETURNS TABLE (
    queue_name text, msg_id bigint, job_class text, error_class text, error_message text,
    read_ct integer, max_attempts integer, failed_at timestamptz, next_attempt_at timestamptz,
    next_step text
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    f record;
    drainers text[] := pgbus.drained_queues(alive_within);
BEGIN
    FOR f IN
        SELECT * FROM pgbus.job_failures j
        WHERE (only_queue IS NULL OR j.queue_name = only_queue)
          AND (before_at IS NULL
               OR (j.failed_at, j.queue_name, j.msg_id) < (before_at, before_queue, before_id))
        ORDER BY j.failed_at DESC, j.queue_name DESC, j.msg_id DESC
        LIMIT least(greatest(coalesce(page_size, 25), 1), 500)
    LOOP
        queue_name := f.queue_name; msg_id := f.msg_id; job_class := f.job_class;
        error_class := f.error_class; error_message := f.error_message; read_ct := f.read_ct;
        max_attempts := f.max_attempts; failed_at := f.failed_at;
        next_attempt_at := NULL;
        IF EXISTS (SELECT 1 FROM pgmq.meta x WHERE x.queue_name = f.queue_name) THEN
            EXECUTE format('SELECT vt FROM pgmq.%I WHERE msg_id = $1',
                           pgmq.format_table_name(f.queue_name, 'q'))
                INTO next_attempt_at USING f.msg_id;
        END IF;
        next_step := CASE WHEN next_attempt_at IS NULL
                          THEN 'The message is no longer in the queue'
                          ELSE pgbus.job_next_step(f.read_ct, next_attempt_at, f.max_attempts,
                                   f.error_class,
                                   EXISTS (SELECT 1 FROM pgbus.queue_pauses p
                                           WHERE p.queue_name = f.queue_name),
                                   f.queue_name = ANY (drainers)) END;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Live processes with their health: 'healthy' (heartbeat within stalled_after), 'stalled'
-- (silent longer, but not yet stale), 'stale' (silent beyond stale_after: likely gone), and
-- a worker's jobs per minute over its life.
CREATE OR REPLACE FUNCTION pgbus.process_status(
    stalled_after interval DEFAULT interval '30 seconds',
    stale_after interval DEFAULT interval '5 minutes'
) RETURNS TABLE (
    id bigint, kind text, hostname text, pid integer, app_revision text, metadata jsonb,
    started_at timestamptz, last_heartbeat_at timestamptz, heartbeat_age_seconds float8,
    status text, jobs_per_minute float8
)
LANGUAGE sql STABLE AS $$
    SELECT p.id, p.kind, p.hostname, p.pid, p.app_revision, p.metadata, p.started_at,
           p.last_heartbeat_at, extract(epoch FROM now() - p.last_heartbeat_at)::float8,
           CASE WHEN p.last_heartbeat_at > now() - stalled_after THEN 'healthy'
                WHEN p.last_heartbeat_at > now() - stale_after THEN 'stalled'
                ELSE 'stale' END,
           CASE WHEN p.metadata ? 'jobs_processed' AND jsonb_typeof(p.metadata -> 'jobs_processed') = 'number'
                THEN round(((p.metadata ->> 'jobs_processed')::float8
                            / greatest(extract(epoch FROM p.last_heartbeat_at - p.started_at)::float8 / 60, 1.0 / 60))::numeric, 2)::float8
           END
    FROM pgbus.processes p
    ORDER BY p.kind, p.hostname, p.pid
$$;

-- (Its earlier signature, without count_limit.)
DROP FUNCTION IF EXISTS pgbus.dashboard_summary(interval, interval);
DROP FUNCTION IF EXISTS pgbus.dashboard_summary(interval, interval, integer);

-- The queue figures of pgbus.queue_stats as one JSON array, so that a page can read them once
-- and hand them to dashboard_summary and health_verdict (counting queues is the costly part).
DROP FUNCTION IF EXISTS pgbus.queue_figures(interval, integer);
CREATE OR REPLACE FUNCTION pgbus.queue_figures(
    alive_within interval DEFAULT interval '5 minutes', count_limit integer DEFAULT NULL,
    reuse_within interval DEFAULT NULL
) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.queue_name), '[]')
    FROM pgbus.queue_stats(NULL, alive_within, count_limit, reuse_within) x
$$;

-- The home page's cards in one answer (count_limit as in queue_stats; queue_figures: the
-- answer of pgbus.queue_figures when the caller has it already).
CREATE OR REPLACE FUNCTION pgbus.dashboard_summary(
    stalled_after interval DEFAULT interval '30 seconds',
    stale_after interval DEFAULT interval '5 minutes',
    count_limit integer DEFAULT NULL,
    queue_figures jsonb DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- (PL/pgSQL: it reads a view, which is created after the functions.)
    RETURN (WITH q AS (
             SELECT * FROM jsonb_to_recordset(
                 coalesce(queue_figures, pgbus.queue_figures(stale_after, count_limit)))
                 AS r(queue_name text, is_dlq boolean, depth bigint, visible bigint,
                      paused boolean, counts_capped boolean)),
         p AS (SELECT * FROM pgbus.process_status(stalled_after, stale_after))
    SELECT jsonb_build_object(
        'queues', (SELECT count(*) FROM q WHERE NOT q.is_dlq),
        'enqueued', (SELECT coalesce(sum(q.depth), 0) FROM q WHERE NOT q.is_dlq),
        'visible', (SELECT coalesce(sum(q.visible), 0) FROM q WHERE NOT q.is_dlq),
        'paused_queues', (SELECT count(*) FROM q WHERE q.paused),
        'processes', (SELECT count(*) FROM p WHERE p.status = 'healthy'),
        'stale_processes', (SELECT count(*) FROM p WHERE p.status <> 'healthy'),
        -- Failed jobs: counted up to count_limit, PostgreSQL's estimate above it.
        'failed', (SELECT CASE WHEN count_limit IS NOT NULL AND n > count_limit
                               THEN greatest(n, (SELECT c.reltuples::bigint FROM pg_class c
                                                 WHERE c.oid = 'pgbus.job_failures'::regclass))
                               ELSE n END
                   FROM (SELECT count(*) AS n FROM (SELECT 1 FROM pgbus.job_failures
                                                    LIMIT coalesce(count_limit + 1, NULL)) f) c),
        'failed_estimated', (SELECT count_limit IS NOT NULL AND count(*) > count_limit
                             FROM (SELECT 1 FROM pgbus.job_failures LIMIT coalesce(count_limit + 1, NULL)) f),
        'dead_letters', (SELECT coalesce(sum(q.depth), 0) FROM q WHERE q.is_dlq),
        'estimated', (SELECT coalesce(bool_or(q.counts_capped), false) FROM q),
        'throughput_per_minute', (SELECT round(count(*) / 5.0, 1) FROM pgbus.job_stats s
                                  WHERE s.created_at > now() - interval '5 minutes'),
        'oldest_transaction_age_seconds', (SELECT o.age_seconds FROM pgbus.oldest_transaction o)));
END;
$$;
