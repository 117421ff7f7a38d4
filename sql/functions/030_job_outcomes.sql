-- How a job's execution ends. Each function is one transaction with everything that goes with
-- the outcome: the message's archive / retry / dead letter, the batch counter (and callbacks),
-- the failure record and the stats row. When the caller ran the job inside the same
-- transaction, the job's own writes commit or roll back with its outcome.

-- The message row, locked; NULL when it is gone (finished by another worker, or deleted).
CREATE OR REPLACE FUNCTION pgbus.lock_message(queue text, msg_id bigint)
RETURNS pgmq.message_record
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
BEGIN
    EXECUTE format('SELECT msg_id, read_ct, enqueued_at, last_read_at, vt, message, headers'
                   ' FROM pgmq.%I WHERE msg_id = $1 FOR UPDATE', pgmq.format_table_name(queue, 'q'))
        INTO m USING msg_id;
    RETURN m;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.record_job_stat(
    queue text, message jsonb, status text, duration_ms integer, latency_ms bigint, retry_count integer
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO pgbus.job_stats (job_class, queue_name, status, duration_ms, enqueue_latency_ms, retry_count)
    VALUES (coalesce(message ->> 'job_class', 'event:' || (message ->> 'routing_key'), '(unknown)'), queue, status,
            greatest(coalesce(duration_ms, 0), 0), latency_ms, greatest(coalesce(retry_count, 0), 0))
$$;

-- (Its earlier signature, without raise_if_gone.)
DROP FUNCTION IF EXISTS pgbus.job_succeeded(text, bigint, integer, bigint, boolean);

-- Success of several messages of one queue at once (a worker acknowledges jobs that did not
-- use the database in bulk): archive them, count their batch members, record their stats.
-- Returns the ids it completed; an id missing from the answer was already gone (finished by
-- another run). durations_ms and latencies_ms run parallel to msg_ids.
CREATE OR REPLACE FUNCTION pgbus.jobs_succeeded(
    queue text, msg_ids bigint[], durations_ms integer[] DEFAULT NULL,
    latencies_ms bigint[] DEFAULT NULL, record_stats boolean DEFAULT true
) RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
    done bigint[];
    archive_table text := pgmq.format_table_name(queue, 'a');
    b record;
BEGIN
    done := ARRAY(SELECT pgmq.archive(queue, ARRAY(SELECT DISTINCT unnest(msg_ids) ORDER BY 1)));
    IF cardinality(done) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = ANY (done);
    -- Batches in a fixed order, so two bulk completions never wait on each other in a cycle.
    FOR b IN EXECUTE format(
        'SELECT (message ->> ''batch_id'')::uuid AS batch_id, count(*)::integer AS n FROM pgmq.%I'
        ' WHERE msg_id = ANY ($1) AND message ? ''batch_id'' GROUP BY 1 ORDER BY 1', archive_table)
        USING done
    LOOP
        PERFORM pgbus.batch_member_done(b.batch_id, 'completed', b.n);
    END LOOP;
    IF record_stats THEN
        EXECUTE format(
            'INSERT INTO pgbus.job_stats (job_class, queue_name, status, duration_ms, enqueue_latency_ms, retry_count)'
            ' SELECT coalesce(a.message ->> ''job_class'', ''event:'' || (a.message ->> ''routing_key''), ''(unknown)''), $2, ''success'','
            '        greatest(coalesce(t.duration_ms, 0), 0), t.latency_ms, greatest(a.read_ct - 1, 0)'
            ' FROM pgmq.%I a'
            ' LEFT JOIN (SELECT DISTINCT ON (u.msg_id) u.msg_id, u.duration_ms, u.latency_ms'
            '            FROM unnest($3, $4, $5) WITH ORDINALITY AS u(msg_id, duration_ms, latency_ms, i)'
            '            ORDER BY u.msg_id, u.i) AS t ON t.msg_id = a.msg_id'
            ' WHERE a.msg_id = ANY ($1)', archive_table)
            USING done, queue, msg_ids, durations_ms, latencies_ms;
    END IF;
    RETURN QUERY SELECT unnest(done);
END;
$$;

-- Success of one message, in the caller's transaction (the job's own writes commit with it).
-- When the message is already gone (another run finished it) nothing is done: the answer is
-- false, or with raise_if_gone the error PB001, which aborts the caller's transaction and so
-- the job's writes with it.
CREATE OR REPLACE FUNCTION pgbus.job_succeeded(
    queue text, msg_id bigint, duration_ms integer DEFAULT 0, latency_ms bigint DEFAULT NULL,
    record_stats boolean DEFAULT true, raise_if_gone boolean DEFAULT false
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pgbus.jobs_succeeded(queue, ARRAY[msg_id], ARRAY[duration_ms],
                                                  ARRAY[latency_ms], record_stats)) THEN
        RETURN true;
    END IF;
    IF raise_if_gone THEN
        RAISE EXCEPTION 'pgbus: message % of % was finished by another run', msg_id, queue
            USING ERRCODE = 'PB001';
    END IF;
    RETURN false;
END;
$$;

-- Moves a message to <queue>_dlq (its body kept, the error and origin in its headers) and
-- removes it from the queue; counts it as discarded in its batch. False when it is gone.
CREATE OR REPLACE FUNCTION pgbus.dead_letter(
    queue text, msg_id bigint, error jsonb, record_stats boolean DEFAULT true
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record := pgbus.lock_message(queue, msg_id);
    dlq text := queue || '_dlq';
BEGIN
    IF m.msg_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM pgbus.ensure_queue(dlq, false);
    PERFORM pgmq.send(dlq, m.message,
                      coalesce(m.headers, '{}') || jsonb_build_object('pgbus_dead_letter', jsonb_build_object(
                          'queue', queue, 'msg_id', msg_id, 'read_ct', m.read_ct,
                          'error', error, 'dead_lettered_at', now())));
    PERFORM pgmq.delete(queue, msg_id);
    DELETE FROM pgbus.job_failures f WHERE f.queue_name = queue AND f.msg_id = dead_letter.msg_id;
    IF m.message ? 'batch_id' THEN
        PERFORM pgbus.batch_member_done((m.message ->> 'batch_id')::uuid, 'discarded');
    END IF;
    IF record_stats THEN
        PERFORM pgbus.record_job_stat(queue, m.message, 'dead_lettered', 0, NULL, m.read_ct - 1);
    END IF;
    RETURN true;
END;
$$;

-- Failure: with retries left, record the error and hide the message for the backoff delay
-- ('retry'); with none left ('max_retries' retries after the first attempt), dead-letter it
-- ('dead_lettered'); 'gone' when the message no longer exists.
-- error = {"class", "message", "backtrace" (text, or a list of frames), ...};
-- policy = {"max_retries", "backoff_base",
-- "backoff_max" (seconds), "jitter" (fraction)}.
CREATE OR REPLACE FUNCTION pgbus.job_failed(
    queue text, msg_id bigint, error jsonb, policy jsonb, duration_ms integer DEFAULT 0,
    record_stats boolean DEFAULT true
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    m pgmq.message_record;
    delay interval;
BEGIN
    IF jsonb_typeof(policy -> 'max_retries') IS DISTINCT FROM 'number' THEN
        RAISE EXCEPTION 'pgbus: job_failed needs policy.max_retries, got %', policy
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    m := pgbus.lock_message(queue, msg_id);
    IF m.msg_id IS NULL THEN
        RETURN 'gone';
    END IF;
    IF m.read_ct > (policy ->> 'max_retries')::integer THEN
        PERFORM pgbus.dead_letter(queue, msg_id, error, record_stats);
        RETURN 'dead_lettered';
    END IF;
    delay := pgbus.retry_delay(m.read_ct,
                               make_interval(secs => (policy ->> 'backoff_base')::float8),
                               make_interval(secs => (policy ->> 'backoff_max')::float8),
                               (policy ->> 'jitter')::float8);
    PERFORM pgmq.set_vt(queue, msg_id, clock_timestamp() + delay);
    INSERT INTO pgbus.job_failures AS f
        (queue_name, msg_id, job_class, error_class, error_message, backtrace, read_ct, max_attempts)
    VALUES (queue, msg_id, m.message ->> 'job_class', coalesce(error ->> 'class', 'Error'),
            coalesce(error ->> 'message', ''),
            CASE jsonb_typeof(error -> 'backtrace')  -- a list of frames, or already text
                WHEN 'array' THEN (SELECT string_agg(f, E'\n') FROM jsonb_array_elements_text(error -> 'backtrace') f)
                ELSE error ->> 'backtrace' END,
            m.read_ct, (policy ->> 'max_retries')::integer + 1)
    ON CONFLICT ON CONSTRAINT job_failures_pkey DO UPDATE
        SET error_class = excluded.error_class, error_message = excluded.error_message,
            backtrace = excluded.backtrace, read_ct = excluded.read_ct,
            max_attempts = excluded.max_attempts, failed_at = now();
    IF record_stats THEN
        PERFORM pgbus.record_job_stat(queue, m.message, 'failed', duration_ms, NULL, m.read_ct - 1);
    END IF;
    RETURN 'retry';
END;
$$;
