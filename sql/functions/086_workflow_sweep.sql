-- The sweep: the dispatcher's workflow duty, one function per repair (pg_cron can run any of
-- them, or pgbus.workflow_sweep for all). Each run is repaired on its own: a repair that raises
-- is undone for that run alone, recorded on it (a repair_failed event) and answered under
-- "failed" for the caller to report, and the other runs are repaired all the same. A run whose
-- repair would wait for a lock (a session holding one of its rows) is one that raises: within
-- pgbus.workflow_sweep no lock is waited for longer than its `lock_wait`, so one stuck run
-- cannot hold back the others; a locked run itself is passed over (SKIP LOCKED).
--
-- A repair function answers {"done": [entry, ...], "failed": [entry, ...]}, an entry being
-- {"workflow_id", "workflow_class", "step", "was": the run's status before, "status": after,
-- "error_class": what the attempt recorded, ...}; a failed one adds "error": {"class":
-- "pgbus.SweepRepairFailed", "sqlstate", "message"}.

-- (Before it moved here, with its earlier signature.)
DROP FUNCTION IF EXISTS pgbus.workflow_sweep(interval, text, interval, interval);

-- What a repair did to one run.
CREATE OR REPLACE FUNCTION pgbus.workflow_repair_entry(
    run pgbus.workflows, attempt pgbus.workflow_steps, status text, extra jsonb DEFAULT '{}'
) RETURNS jsonb
LANGUAGE sql AS $$  -- (volatile: it reads the attempt as the repair, earlier in the statement, left it)
    SELECT jsonb_build_object(
        'workflow_id', run.workflow_id, 'workflow_class', run.workflow_class,
        'step', attempt.step_name, 'was', run.status, 'status', status,
        'error_class', (SELECT s.error_class FROM pgbus.workflow_steps s WHERE s.step_id = attempt.step_id))
        || coalesce(extra, '{}')
$$;

-- A repair of one run raised (its changes are undone): recorded on the run as a repair_failed
-- event, and answered.
CREATE OR REPLACE FUNCTION pgbus.workflow_repair_failed(
    run pgbus.workflows, attempt pgbus.workflow_steps, repair text, sqlstate text, message text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgbus.workflow_event(run.workflow_id, 'repair_failed', attempt.step_id, 'pgbus', message,
                                 jsonb_build_object('repair', repair, 'step', attempt.step_name,
                                                    'sqlstate', sqlstate));
    RETURN pgbus.workflow_repair_entry(run, attempt, run.status, jsonb_build_object(
        'repair', repair,
        'error', jsonb_build_object('class', 'pgbus.SweepRepairFailed', 'sqlstate', sqlstate,
                                    'message', message)));
END;
$$;

-- Attempts running past their timeout, or past `stall_threshold` without one: stalled, and
-- `stall_action` (pause, reattempt or cancel) applies to the run (an operator-paused run stays
-- paused). Entries add "action".
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep_stalls(
    stall_threshold interval DEFAULT interval '15 minutes',
    stall_action text DEFAULT 'pause'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    done jsonb := '[]';
    failed jsonb := '[]';
BEGIN
    IF stall_action IS NULL OR stall_action NOT IN ('pause', 'reattempt', 'cancel') THEN
        RAISE EXCEPTION 'pgbus: the stall action is pause, reattempt or cancel, got %', stall_action
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        WHERE w.status IN ('running', 'paused') AND s.status = 'running'
          AND s.started_at < now() - coalesce(s.timeout, stall_threshold)
          -- (True of every running attempt: they let the planner start from the open attempts,
          -- through workflow_steps_open_idx, and find each one's run by its key.)
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id
        ORDER BY s.started_at
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        BEGIN
            done := done || pgbus.workflow_repair_entry(
                r.run, r.attempt, pgbus.workflow_stall(r.run, r.attempt, 'sweep', stall_action),
                jsonb_build_object('action', stall_action));
        EXCEPTION WHEN OTHERS THEN
            failed := failed || pgbus.workflow_repair_failed(r.run, r.attempt, 'stall', SQLSTATE, SQLERRM);
        END;
    END LOOP;
    RETURN jsonb_build_object('done', done, 'failed', failed);
END;
$$;

-- Waiting steps past their wait deadline: their on_timeout applies (pgbus.workflow_time_out).
-- Entries add "action" (the step's on_timeout).
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep_wait_timeouts()
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    done jsonb := '[]';
    failed jsonb := '[]';
BEGIN
    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        WHERE w.status = 'waiting' AND s.status = 'waiting' AND s.wait_deadline < clock_timestamp()
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id  -- (as in workflow_sweep_stalls)
        ORDER BY s.wait_deadline
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        BEGIN
            done := done || pgbus.workflow_repair_entry(
                r.run, r.attempt, pgbus.workflow_time_out(r.run, r.attempt),
                jsonb_build_object('action', coalesce(pgbus.workflow_step_definition(
                    (r.run).workflow_class, (r.attempt).step_name) ->> 'on_timeout', 'pause')));
        EXCEPTION WHEN OTHERS THEN
            failed := failed || pgbus.workflow_repair_failed(r.run, r.attempt, 'wait_timeout', SQLSTATE, SQLERRM);
        END;
    END LOOP;
    RETURN jsonb_build_object('done', done, 'failed', failed);
END;
$$;

-- Fan-out steps whose batch finished more than `resend_after` ago without its callback
-- arriving: resolved as the callback would (pgbus.workflow_resolve); those whose batch is gone
-- are paused (FanOutBatchGone).
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep_fan_outs(resend_after interval DEFAULT interval '1 minute')
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    done jsonb := '[]';
    failed jsonb := '[]';
BEGIN
    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        LEFT JOIN pgbus.batches b ON b.batch_id = s.batch_id
        WHERE w.status = 'waiting' AND s.status = 'waiting' AND s.batch_id IS NOT NULL
          AND (b.batch_id IS NULL OR (b.status = 'finished' AND b.finished_at < now() - resend_after))
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id  -- (as in workflow_sweep_stalls)
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        BEGIN
            PERFORM pgbus.workflow_event((r.run).workflow_id, 'fan_out_repaired', (r.attempt).step_id, 'pgbus',
                                         'its batch callback was lost',
                                         jsonb_build_object('step', (r.attempt).step_name));
            done := done || pgbus.workflow_repair_entry(
                r.run, r.attempt, pgbus.workflow_resolve(r.run, r.attempt, 'pgbus'));
        EXCEPTION WHEN OTHERS THEN
            failed := failed || pgbus.workflow_repair_failed(r.run, r.attempt, 'fan_out', SQLSTATE, SQLERRM);
        END;
    END LOOP;
    RETURN jsonb_build_object('done', done, 'failed', failed);
END;
$$;

-- Scheduled steps due more than `resend_after` ago whose message is gone from their queue
-- (lost): sent again through pgbus.workflow_send_step, the sender of every step message.
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep_lost_steps(resend_after interval DEFAULT interval '1 minute')
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    present boolean;
    done jsonb := '[]';
    failed jsonb := '[]';
BEGIN
    FOR r IN
        SELECT w AS run, s AS attempt
        FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
        WHERE w.status = 'ready' AND s.status = 'scheduled' AND s.scheduled_at < now() - resend_after
          AND s.ended_at IS NULL AND w.workflow_id = s.workflow_id  -- (as in workflow_sweep_stalls)
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        BEGIN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgmq.%I WHERE msg_id = $1)',
                           pgmq.format_table_name((r.attempt).queue, 'q'))
                INTO present USING (r.attempt).msg_id;
            CONTINUE WHEN present;
            UPDATE pgbus.workflow_steps
            SET msg_id = pgbus.workflow_send_step((r.run).workflow_id, (r.attempt).step_id, (r.attempt).queue,
                                                  clock_timestamp())
            WHERE step_id = (r.attempt).step_id;
            PERFORM pgbus.workflow_event((r.run).workflow_id, 'step_resent', (r.attempt).step_id, 'pgbus',
                                         'its message was lost', jsonb_build_object('step', (r.attempt).step_name));
            done := done || pgbus.workflow_repair_entry(r.run, r.attempt, (r.run).status);
        EXCEPTION WHEN OTHERS THEN
            failed := failed || pgbus.workflow_repair_failed(r.run, r.attempt, 'lost_step', SQLSTATE, SQLERRM);
        END;
    END LOOP;
    RETURN jsonb_build_object('done', done, 'failed', failed);
END;
$$;

-- Deletes finished and cancelled runs that ended more than `retention` ago (their attempts,
-- events and signals go with them). Returns how many.
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep_old_runs(retention interval DEFAULT interval '30 days')
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgbus.workflows
        WHERE status IN ('finished', 'cancelled') AND ended_at < now() - retention
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

-- Forgets the job_failures rows of step messages that are no longer in their queue: a StepJob
-- that failed (its step could not begin, say) and whose message the workflow functions then
-- archived or deleted has no failure left to show. Returns how many rows went.
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep_failures()
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    n integer;
    total integer := 0;
BEGIN
    FOR q IN SELECT DISTINCT f.queue_name FROM pgbus.job_failures f WHERE f.job_class = pgbus.step_job_class() LOOP
        IF NOT EXISTS (SELECT 1 FROM pgmq.meta m WHERE m.queue_name = q) THEN
            DELETE FROM pgbus.job_failures f WHERE f.queue_name = q AND f.job_class = pgbus.step_job_class();
        ELSE
            EXECUTE format('DELETE FROM pgbus.job_failures f WHERE f.queue_name = $1 AND f.job_class = $2'
                           ' AND NOT EXISTS (SELECT 1 FROM pgmq.%I m WHERE m.msg_id = f.msg_id)',
                           pgmq.format_table_name(q, 'q'))
                USING q, pgbus.step_job_class();
        END IF;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    RETURN total;
END;
$$;

-- Every repair, then the gauge, in one call. Answers what it did: "stalled" and "timed_out"
-- (their entries), "resolved" and "resent" (counts), "deleted" (old runs), "failures_forgotten";
-- "moved": the entries of every run whose status the repairs changed (each is worth its
-- workflow_paused / _cancelled / _finished event); "failed": the runs whose repair raised (and
-- a cleanup that raised: {"repair": "old_runs" | "failures", "error"}, undone alone); and the
-- gauge's "runs" and "stuck". `lock_wait` bounds every lock wait inside it (lock_timeout, for
-- this call only): a repair that would wait longer fails for its run alone.
DROP FUNCTION IF EXISTS pgbus.workflow_sweep(interval, text, interval, interval, interval, interval);
CREATE OR REPLACE FUNCTION pgbus.workflow_sweep(
    stall_threshold interval DEFAULT interval '15 minutes',
    stall_action text DEFAULT 'pause',
    retention interval DEFAULT interval '30 days',
    resend_after interval DEFAULT interval '1 minute',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days',
    lock_wait interval DEFAULT interval '2 seconds'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    stalls jsonb;
    timeouts jsonb;
    fan_outs jsonb;
    lost jsonb;
    repaired jsonb;
    deleted integer := 0;
    forgotten integer := 0;
    cleanups jsonb := '[]';
    previous_lock_timeout text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', (extract(epoch FROM lock_wait) * 1000)::bigint::text || 'ms', true);
    stalls := pgbus.workflow_sweep_stalls(stall_threshold, stall_action);
    timeouts := pgbus.workflow_sweep_wait_timeouts();
    fan_outs := pgbus.workflow_sweep_fan_outs(resend_after);
    lost := pgbus.workflow_sweep_lost_steps(resend_after);
    BEGIN
        deleted := pgbus.workflow_sweep_old_runs(retention);
    EXCEPTION WHEN OTHERS THEN
        cleanups := cleanups || jsonb_build_object('repair', 'old_runs', 'error', jsonb_build_object(
            'class', 'pgbus.SweepRepairFailed', 'sqlstate', SQLSTATE, 'message', SQLERRM));
    END;
    BEGIN
        forgotten := pgbus.workflow_sweep_failures();
    EXCEPTION WHEN OTHERS THEN
        cleanups := cleanups || jsonb_build_object('repair', 'failures', 'error', jsonb_build_object(
            'class', 'pgbus.SweepRepairFailed', 'sqlstate', SQLSTATE, 'message', SQLERRM));
    END;
    PERFORM set_config('lock_timeout', previous_lock_timeout, true);
    repaired := (stalls -> 'done') || (timeouts -> 'done') || (fan_outs -> 'done');
    RETURN jsonb_build_object(
        'stalled', stalls -> 'done',
        'timed_out', timeouts -> 'done',
        'resolved', jsonb_array_length(fan_outs -> 'done'),
        'resent', jsonb_array_length(lost -> 'done'),
        'deleted', deleted,
        'failures_forgotten', forgotten,
        'moved', coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements(repaired) e
                           WHERE e ->> 'status' IS DISTINCT FROM e ->> 'was'), '[]'),
        'failed', (stalls -> 'failed') || (timeouts -> 'failed') || (fan_outs -> 'failed') || (lost -> 'failed')
                  || cleanups)
        || pgbus.workflow_gauges(stall_threshold, overdue_after, waiting_threshold);
END;
$$;
