-- Batches: a group of jobs with callbacks when all of them finished. Counters move in the same
-- transaction as each member's archive or dead letter, so a crash never leaves them short.

-- Opens a batch; members join with pgbus.enqueue(..., batch_id => ...) until pgbus.batch_close.
CREATE OR REPLACE FUNCTION pgbus.batch_open(
    description text DEFAULT NULL,
    properties jsonb DEFAULT '{}',
    on_complete jsonb DEFAULT NULL,
    on_success jsonb DEFAULT NULL,
    on_discard jsonb DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    cb jsonb;
    id uuid;
BEGIN
    IF jsonb_typeof(coalesce(properties, '{}')) <> 'object' THEN
        RAISE EXCEPTION 'pgbus: batch properties must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH cb IN ARRAY ARRAY[on_complete, on_success, on_discard] LOOP
        IF cb IS NOT NULL AND (jsonb_typeof(cb) <> 'object'
                               OR coalesce(btrim(cb ->> 'job_class'), '') = ''
                               OR NOT pgbus.valid_queue_name(cb ->> 'queue')) THEN
            RAISE EXCEPTION 'pgbus: a batch callback is {"job_class": ..., "queue": ...}, got %', cb
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    INSERT INTO pgbus.batches (description, properties, on_complete, on_success, on_discard)
    VALUES (description, coalesce(properties, '{}'), on_complete, on_success, on_discard)
    RETURNING batch_id INTO id;
    RETURN id;
END;
$$;

-- Sends a finished batch's callbacks: on_complete always, on_success when nothing was
-- dead-lettered, on_discard when something was. Each gets the batch's properties.
CREATE OR REPLACE FUNCTION pgbus.batch_send_callbacks(b pgbus.batches)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cb jsonb;
    args jsonb[] := ARRAY[jsonb_build_object('args', jsonb_build_array(b.properties))];
BEGIN
    FOREACH cb IN ARRAY ARRAY[
        b.on_complete,
        CASE WHEN b.discarded_jobs = 0 THEN b.on_success END,
        CASE WHEN b.discarded_jobs > 0 THEN b.on_discard END
    ] LOOP
        CONTINUE WHEN cb IS NULL;
        PERFORM pgbus.enqueue(cb ->> 'queue', cb ->> 'job_class', args);
    END LOOP;
END;
$$;

-- Finishes the batch if every member is done and it is no longer open; true only for the one
-- call that finished it (the row lock makes two simultaneous last members see one winner).
CREATE OR REPLACE FUNCTION pgbus.batch_finish_if_done(batch uuid)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    b pgbus.batches;
BEGIN
    UPDATE pgbus.batches x SET status = 'finished', finished_at = now()
    WHERE x.batch_id = batch AND x.status = 'processing'
      AND x.completed_jobs + x.discarded_jobs = x.total_jobs
    RETURNING * INTO b;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pgbus.batch_send_callbacks(b);
    RETURN true;
END;
$$;

-- Ends the adding phase. An empty batch finishes here; so does one whose members all finished
-- already (possible when members were added outside a transaction).
CREATE OR REPLACE FUNCTION pgbus.batch_close(batch uuid)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus.batches SET status = 'processing' WHERE batch_id = batch AND status = 'open';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgbus: batch % is not open', batch USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN pgbus.batch_finish_if_done(batch);
END;
$$;

-- (Its earlier signature, without n.)
DROP FUNCTION IF EXISTS pgbus.batch_member_done(uuid, text);

-- Counts n members as completed or discarded (dead-lettered); true when that finished it.
-- A batch that is gone (cleaned up) counts nothing.
CREATE OR REPLACE FUNCTION pgbus.batch_member_done(batch uuid, outcome text, n integer DEFAULT 1)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF outcome IS NULL OR outcome NOT IN ('completed', 'discarded') THEN
        RAISE EXCEPTION 'pgbus: batch member outcome is completed or discarded, got %', outcome
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n IS NULL OR n < 1 THEN
        RAISE EXCEPTION 'pgbus: batch_member_done counts at least one member, got %', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE pgbus.batches
    SET completed_jobs = completed_jobs + CASE WHEN outcome = 'completed' THEN n ELSE 0 END,
        discarded_jobs = discarded_jobs + CASE WHEN outcome = 'discarded' THEN n ELSE 0 END
    WHERE batch_id = batch AND status <> 'finished';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN pgbus.batch_finish_if_done(batch);
END;
$$;
