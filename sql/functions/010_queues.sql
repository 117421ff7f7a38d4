-- Queues and messages: creating queues, enqueueing jobs, reading them, keeping them invisible.

-- A queue name pgbus accepts: a-z, 0-9 and _, at most 43 characters so that its dead letter
-- queue (<name>_dlq) still fits PGMQ's 47; or such a dead letter queue's own name.
CREATE OR REPLACE FUNCTION pgbus.valid_queue_name(queue text)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(queue ~ '^[a-z0-9_]{1,43}$' OR queue ~ '^[a-z0-9_]{1,43}_dlq$', false)
$$;

CREATE OR REPLACE FUNCTION pgbus.check_queue_name(queue text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT pgbus.valid_queue_name(queue) THEN
        RAISE EXCEPTION 'pgbus: invalid queue name %', quote_nullable(queue)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'queue names are 1-43 characters: a-z, 0-9 and _';
    END IF;
END;
$$;

-- A queue's insert notification, PGMQ's (the channel pgmq.q_<queue>.INSERT, at most one per
-- throttle interval through pgmq.notify_insert_throttle) without its wait: PGMQ's trigger
-- updates the queue's throttle row, so while a transaction that notified is still open, every
-- other send to the queue waits for it to end (a step's end behind another's commit; any send
-- behind an application transaction that enqueued and went on working). Here a send that finds
-- the row locked goes on without notifying: the transaction holding it notifies when it commits,
-- and a worker that misses a wake-up polls. (If that transaction rolls back, the wake-up is
-- missed likewise.)
CREATE OR REPLACE FUNCTION pgbus.queue_notify_listeners()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- (The name as a parameter of its own: with substring() in the query, the generic plan
    -- costed a little more than a custom one, so every insert planned the query again.)
    queue text := substring(TG_TABLE_NAME FROM 3);
BEGIN
    PERFORM 1 FROM pgmq.notify_insert_throttle t
    WHERE t.queue_name = queue
      AND (t.throttle_interval_ms = 0
           OR clock_timestamp() - t.last_notified_at >= t.throttle_interval_ms * interval '1 millisecond')
    FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        UPDATE pgmq.notify_insert_throttle t SET last_notified_at = clock_timestamp()
        WHERE t.queue_name = queue;
        PERFORM pg_notify('pgmq.' || TG_TABLE_NAME || '.' || TG_OP, NULL);
    END IF;
    RETURN NEW;
END;
$$;

-- Puts pgbus.queue_notify_listeners in place of PGMQ's notification trigger on every queue
-- table that has PGMQ's (same trigger name, so pgmq.disable_notify_insert still removes it),
-- or on `only_queue`'s; returns how many it changed. Run by `pgbus db migrate` (once per queue:
-- the swap locks the table briefly) and by ensure_queue; a queue table this role does not own
-- keeps PGMQ's trigger.
CREATE OR REPLACE FUNCTION pgbus.queue_notify_adopt(only_queue text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    tbl text;
    changed integer := 0;
BEGIN
    FOR tbl IN
        SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'pgmq'::regnamespace AND t.tgname = 'trigger_notify_queue_insert_listeners'
          AND t.tgfoid = 'pgmq.notify_queue_listeners'::regproc
          AND (only_queue IS NULL OR c.relname = pgmq.format_table_name(only_queue, 'q'))
        ORDER BY c.relname
    LOOP
        BEGIN
            EXECUTE format('DROP TRIGGER trigger_notify_queue_insert_listeners ON pgmq.%1$I;'
                           ' CREATE TRIGGER trigger_notify_queue_insert_listeners AFTER INSERT ON pgmq.%1$I'
                           ' FOR EACH ROW EXECUTE FUNCTION pgbus.queue_notify_listeners()', tbl);
            changed := changed + 1;
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;
        END;
    END LOOP;
    RETURN changed;
END;
$$;

-- Creates a PGMQ queue (with insert notifications when asked) unless it exists; true when it
-- created it. Safe when several sessions create the same queue at the same moment.
CREATE OR REPLACE FUNCTION pgbus.ensure_queue(queue text, notify boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgbus.check_queue_name(queue);
    IF EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = queue) THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgbus.ensure_queue'), hashtext(queue));
    IF EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = queue) THEN
        RETURN false;
    END IF;
    PERFORM pgmq.create(queue);
    IF notify THEN
        PERFORM pgmq.enable_notify_insert(queue, 250);
        PERFORM pgbus.queue_notify_adopt(only_queue => queue);
    END IF;
    BEGIN
        PERFORM pgbus.queue_functions_refresh();
    EXCEPTION WHEN insufficient_privilege THEN
        -- A role that does not own pgbus's functions: until the next `pgbus db migrate`,
        -- the queue functions build their statement for this queue on each call.
        NULL;
    END;
    RETURN true;
END;
$$;

-- The message a job travels in. One definition, used for every job pgbus sends.
-- scheduled_at and batch_id appear only when set; arguments are kept exactly (nulls included).
-- (PL/pgSQL, not SQL: its plan is kept for the session instead of being made on every call.)
CREATE OR REPLACE FUNCTION pgbus.job_envelope(
    queue text, job_class text, arguments jsonb, run_at timestamptz, batch_id uuid
) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN jsonb_build_object(
               'job_class', job_class,
               'job_id', gen_random_uuid(),
               'queue', queue,
               'args', coalesce(arguments -> 'args', '[]'::jsonb),
               'kwargs', coalesce(arguments -> 'kwargs', '{}'::jsonb),
               'enqueued_at', now())
           || CASE WHEN run_at IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('scheduled_at', run_at) END
           || CASE WHEN batch_id IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('batch_id', batch_id) END;
END;
$$;

-- Sends one message per element of `arguments` ({"args": [...], "kwargs": {...}}) to `queue`,
-- visible at `run_at` (now when NULL), as members of `batch_id` when given. One statement, so
-- a bulk enqueue is one round trip; inside the caller's transaction nothing is visible before
-- it commits.
CREATE OR REPLACE FUNCTION pgbus.enqueue(
    queue text,
    job_class text,
    arguments jsonb[],
    run_at timestamptz DEFAULT NULL,
    batch_id uuid DEFAULT NULL
) RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(cardinality(arguments), 0);
BEGIN
    IF job_class IS NULL OR btrim(job_class) = '' THEN
        RAISE EXCEPTION 'pgbus: a job needs a class name' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    IF batch_id IS NOT NULL THEN
        UPDATE pgbus.batches b SET total_jobs = b.total_jobs + n
        WHERE b.batch_id = enqueue.batch_id AND b.status = 'open';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'pgbus: batch % is not open for new jobs', batch_id
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END IF;
    PERFORM pgbus.ensure_queue(queue);
    IF n = 1 THEN  -- a send costs less than a batch of one
        RETURN NEXT pgbus.queue_send(
            queue, pgbus.job_envelope(queue, job_class, arguments[1], run_at, batch_id),
            coalesce(run_at, clock_timestamp()));
        RETURN;
    END IF;
    RETURN QUERY
        SELECT * FROM pgmq.send_batch(
            queue,
            ARRAY(SELECT pgbus.job_envelope(queue, job_class, a, run_at, batch_id)
                  FROM unnest(arguments) WITH ORDINALITY AS t(a, i) ORDER BY i),
            NULL::jsonb[],
            coalesce(run_at, clock_timestamp())
        );
END;
$$;

-- The job class of a workflow step's message (pgbus.workflow.StepJob in Python).
CREATE OR REPLACE FUNCTION pgbus.step_job_class()
RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'pgbus.workflow:StepJob' $$;

-- (Its earlier signature, before workflow steps.)
DROP FUNCTION IF EXISTS pgbus.read_jobs(text[], integer, integer);

-- Reads up to `qty` visible messages from `queues`, earlier queues first (priority order),
-- each hidden for `vt_seconds`. Queues that do not exist yet, or are paused, are passed over. A workflow
-- step's message begins its attempt in the same transaction (pgbus.workflow_begin_step, with
-- `worker` and `app_revision` recorded on it) and carries the attempt's context; one with
-- nothing to run (stale, not due, its run busy) is left out and leaves its place to the next
-- due message, so that a backlog of stale messages ahead of the others is got through in one
-- read instead of `qty` per polling interval (up to 1,000 left out per read, to keep the read's
-- transaction short).
DROP FUNCTION IF EXISTS pgbus.read_jobs(text[], integer, integer, text, text, text);
CREATE OR REPLACE FUNCTION pgbus.read_jobs(
    queues text[], vt_seconds integer, qty integer, worker text DEFAULT NULL,
    app_revision text DEFAULT NULL, stall_action text DEFAULT 'pause', start_now integer DEFAULT NULL
) RETURNS TABLE (queue text, msg_id bigint, read_ct integer, enqueued_at timestamptz,
                 vt timestamptz, message jsonb, context jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    r record;
    remaining integer := qty;
    returned integer := 0;
    asked integer;
    taken integer;
    skipped integer := 0;
BEGIN
    IF vt_seconds IS NULL OR vt_seconds < 1 OR qty IS NULL OR qty < 0 THEN
        RAISE EXCEPTION 'pgbus: read_jobs needs vt_seconds >= 1 and qty >= 0'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH q IN ARRAY coalesce(queues, '{}') LOOP
        EXIT WHEN remaining <= 0;
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = q);
        -- A paused queue (the dashboard's Pause) keeps its messages until it is resumed.
        CONTINUE WHEN EXISTS (SELECT 1 FROM pgbus.queue_pauses p WHERE p.queue_name = q);
        LOOP
            asked := remaining;
            taken := 0;
            FOR r IN SELECT * FROM pgbus.queue_read(q, vt_seconds, asked) LOOP
                taken := taken + 1;
                context := NULL;
                IF r.message ->> 'job_class' = pgbus.step_job_class() THEN
                    BEGIN
                        context := pgbus.workflow_begin_step(q, r.msg_id, r.message, worker,
                                                             read_jobs.app_revision, stall_action,
                                                             start_now IS NULL OR returned < start_now);
                    EXCEPTION WHEN OTHERS THEN
                        -- One step that cannot begin must not stop the others: its StepJob
                        -- fails in the worker like any job (retried with backoff, then
                        -- dead-lettered).
                        context := jsonb_build_object('begin_error', SQLERRM, 'sqlstate', SQLSTATE);
                    END;
                    IF context IS NULL THEN
                        skipped := skipped + 1;
                        CONTINUE;
                    END IF;
                END IF;
                remaining := remaining - 1;
                queue := q;
                msg_id := r.msg_id;
                read_ct := r.read_ct;
                enqueued_at := r.enqueued_at;
                vt := r.vt;
                message := r.message;
                IF context IS NULL OR NOT (context ? 'stalled' OR context ? 'held' OR context ? 'concluded') THEN
                    returned := returned + 1;
                END IF;
                RETURN NEXT;
            END LOOP;
            -- Read again while messages were left out and the queue had more (one left out
            -- was archived or hidden again: the next read takes others).
            EXIT WHEN remaining <= 0 OR taken < asked OR skipped >= 1000;
        END LOOP;
    END LOOP;
END;
$$;

-- The visibility heartbeat: keeps running jobs' messages invisible for another `vt_seconds`.
-- Returns how many were still there (a message already archived is simply not counted).
CREATE OR REPLACE FUNCTION pgbus.extend_visibility(queue text, msg_ids bigint[], vt_seconds integer)
RETURNS integer
LANGUAGE sql AS $$
    SELECT count(*)::integer FROM pgmq.set_vt(queue, msg_ids, vt_seconds)
$$;

-- How long a failed job waits before its next attempt: exponential from `base`, capped at
-- `cap`, spread by +/- `jitter` (a fraction) so a burst of failures does not retry in step.
-- (Computed in seconds as float8, so a long base times 2^n cannot overflow an interval.)
CREATE OR REPLACE FUNCTION pgbus.retry_delay(attempt integer, base interval, cap interval, jitter float8)
RETURNS interval
LANGUAGE sql VOLATILE AS $$
    SELECT make_interval(secs => greatest(0, least(c, least(c, b * power(2, least(greatest(attempt, 1) - 1, 60)))
                                                      * (1 + jitter * (2 * random() - 1)))))
    FROM (SELECT extract(epoch FROM base)::float8 AS b, extract(epoch FROM cap)::float8 AS c) AS secs
$$;

SELECT pgbus.queue_notify_adopt();
