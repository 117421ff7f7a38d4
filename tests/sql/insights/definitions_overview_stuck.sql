-- pgTAP tests for sql/functions/510_workflow_definitions_overview.sql: its stuck count per class
-- (counted in its one read of the ongoing runs, without pgbus.workflow_stuck's rows) against
-- hand-worked answers and against pgbus.workflow_stuck itself, for every reason, each kind of
-- healthy run beside them, other thresholds, and runs created after as_of (stuck, but not
-- ongoing in the window). Rows are written directly, at times relative to now().
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(10);

\o /dev/null
CREATE TEMP TABLE t_runs (tag text PRIMARY KEY, id uuid);
CREATE FUNCTION pg_temp.id(tag text) RETURNS uuid LANGUAGE sql AS $f$ SELECT id FROM t_runs WHERE t_runs.tag = $1 $f$;
-- A run of class cls in status st (paused: with cause), created `age` ago, at step "a", whose
-- current attempt (when a_status is given) is scheduled / started / waiting at those times ago.
CREATE FUNCTION pg_temp.run(tag text, cls text, st text, age interval, a_status text DEFAULT NULL,
                            scheduled interval DEFAULT NULL, started interval DEFAULT NULL,
                            waiting interval DEFAULT NULL, step_timeout interval DEFAULT NULL,
                            cause text DEFAULT 'error', current boolean DEFAULT true)
RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE rid uuid; sid bigint;
BEGIN
    INSERT INTO pgbus.workflows (workflow_class, status, pause_cause, current_step, definition_digest,
                                 created_at, updated_at, ended_at)
    VALUES (cls, st, CASE WHEN st = 'paused' THEN cause END, 'a', 'd1', now() - age, now() - age,
            CASE WHEN st IN ('finished', 'cancelled') THEN now() END)
    RETURNING workflow_id INTO rid;
    IF a_status IS NOT NULL THEN
        INSERT INTO pgbus.workflow_steps (workflow_id, step_name, status, queue, scheduled_at, started_at,
                                          waiting_since, timeout, run_class, ended_at)
        VALUES (rid, 'a', a_status, 'q', now() - scheduled, now() - started, now() - waiting, step_timeout, cls,
                CASE WHEN a_status IN ('completed', 'failed') THEN now() END)
        RETURNING step_id INTO sid;
        IF current THEN
            UPDATE pgbus.workflows SET current_step_id = sid WHERE workflow_id = rid;
        END IF;
    END IF;
    INSERT INTO t_runs VALUES (tag, rid);
    RETURN rid;
END $f$;

INSERT INTO pgbus.workflow_definitions (workflow_class, steps, digest, queue) VALUES
    ('ovs.A', '[{"name": "a"}]', 'd1', 'q'), ('ovs.B', '[{"name": "a"}]', 'd1', 'q');

-- ovs.A, stuck (6): paused on an error, paused by a stall, paused by hand (each with an ended
-- attempt), running past the 15-minute threshold, running past its own 1-minute timeout,
-- ready and due 10 minutes ago.
SELECT pg_temp.run('a_err', 'ovs.A', 'paused', '1 hour', 'failed', '1 hour', '1 hour');
SELECT pg_temp.run('a_stall', 'ovs.A', 'paused', '1 hour', cause => 'stall');
SELECT pg_temp.run('a_manual', 'ovs.A', 'paused', '1 hour', cause => 'manual');
SELECT pg_temp.run('a_stalled', 'ovs.A', 'running', '1 hour', 'running', '30 minutes', '20 minutes');
SELECT pg_temp.run('a_timed', 'ovs.A', 'running', '1 hour', 'running', '2 minutes', '2 minutes', step_timeout => '1 minute');
SELECT pg_temp.run('a_overdue', 'ovs.A', 'ready', '1 hour', 'scheduled', '10 minutes');
-- ovs.A, healthy (7): running 5 minutes; running 20 minutes with a 1-hour timeout; due 2
-- minutes ago; due in an hour; waiting 2 days; a stalled attempt that is not the run's current
-- one; a run whose status does not match its attempt's (ready, attempt running 20 minutes).
SELECT pg_temp.run('a_ok_run', 'ovs.A', 'running', '1 hour', 'running', '5 minutes', '5 minutes');
SELECT pg_temp.run('a_ok_long', 'ovs.A', 'running', '1 hour', 'running', '20 minutes', '20 minutes', step_timeout => '1 hour');
SELECT pg_temp.run('a_ok_due', 'ovs.A', 'ready', '1 hour', 'scheduled', '2 minutes');
SELECT pg_temp.run('a_ok_later', 'ovs.A', 'ready', '1 hour', 'scheduled', '-1 hour');
SELECT pg_temp.run('a_ok_wait', 'ovs.A', 'waiting', '3 days', 'waiting', '2 days', '2 days', '2 days');
SELECT pg_temp.run('a_ok_old_attempt', 'ovs.A', 'running', '1 hour', 'running', '30 minutes', '20 minutes', current => false);
SELECT pg_temp.run('a_ok_mismatch', 'ovs.A', 'ready', '1 hour', 'running', '30 minutes', '20 minutes');
-- ovs.A, ended (not counted): finished, cancelled.
SELECT pg_temp.run('a_done', 'ovs.A', 'finished', '1 hour');
SELECT pg_temp.run('a_cancelled', 'ovs.A', 'cancelled', '1 hour');
-- ovs.B: waiting 8 days (waiting_overdue), paused on an error and created an hour from now (stuck
-- now, but not an ongoing run of the window), ready and due 10 minutes ago created in an hour.
SELECT pg_temp.run('b_wait', 'ovs.B', 'waiting', '9 days', 'waiting', '8 days', '8 days', '8 days');
SELECT pg_temp.run('b_future_paused', 'ovs.B', 'paused', '-1 hour');
SELECT pg_temp.run('b_future_overdue', 'ovs.B', 'ready', '-1 hour', 'scheduled', '10 minutes');
\o

CREATE TEMP VIEW ov AS SELECT * FROM pgbus.workflow_definitions_overview('24h') WHERE workflow_class LIKE 'ovs.%';
CREATE TEMP VIEW oracle AS
    SELECT workflow_class, count(*) AS n FROM pgbus.workflow_stuck() WHERE workflow_class LIKE 'ovs.%' GROUP BY 1;

SELECT is((SELECT workflow_class || ' ' || reason FROM pgbus.workflow_stuck() WHERE workflow_id = pg_temp.id('b_wait')),
          'ovs.B waiting_overdue', 'setup: the run waiting 8 days is waiting_overdue');
SELECT is((SELECT row(ongoing, paused, stuck)::text FROM ov WHERE workflow_class = 'ovs.A'),
          row(13::bigint, 3::bigint, 6::bigint)::text,
          'ovs.A: 13 ongoing, 3 paused, 6 stuck (three paused, two stalled, one overdue)');
SELECT is((SELECT row(ongoing, paused, stuck)::text FROM ov WHERE workflow_class = 'ovs.B'),
          row(1::bigint, 0::bigint, 3::bigint)::text,
          'ovs.B: 1 ongoing, and 3 stuck (the waiting one, and two created after as_of: stuck now, not ongoing in the window)');
SELECT set_eq($$SELECT workflow_class, stuck FROM ov$$, $$SELECT workflow_class, n FROM oracle$$,
              'stuck per class: what pgbus.workflow_stuck says');
-- Other thresholds: stall 30 s (a_ok_run stalls too), overdue 1 minute (a_ok_due is overdue),
-- waiting 1 day (a_ok_wait is waiting_overdue), and with a 1-hour stall threshold (a_stalled
-- is not stalled).
SELECT is((SELECT stuck FROM pgbus.workflow_definitions_overview('24h', stall_threshold => '30 seconds',
                                                                 overdue_after => '1 minute', waiting_threshold => '1 day')
           WHERE workflow_class = 'ovs.A'), 9::bigint, 'lower thresholds: 9 stuck in ovs.A');
SELECT set_eq($$SELECT workflow_class, stuck FROM pgbus.workflow_definitions_overview('24h', stall_threshold => '30 seconds',
                    overdue_after => '1 minute', waiting_threshold => '1 day') WHERE workflow_class LIKE 'ovs.%'$$,
              $$SELECT workflow_class, count(*) FROM pgbus.workflow_stuck('30 seconds', '1 minute', '1 day')
                WHERE workflow_class LIKE 'ovs.%' GROUP BY 1$$,
              'lower thresholds: what pgbus.workflow_stuck says');
SELECT is((SELECT stuck FROM pgbus.workflow_definitions_overview('24h', stall_threshold => '1 hour')
           WHERE workflow_class = 'ovs.A'), 5::bigint, 'a 1-hour stall threshold: 5 stuck in ovs.A (its own timeout still stalls a_timed)');
SELECT set_eq($$SELECT workflow_class, stuck FROM pgbus.workflow_definitions_overview('24h', stall_threshold => '1 hour')
                WHERE workflow_class LIKE 'ovs.%'$$,
              $$SELECT workflow_class, count(*) FROM pgbus.workflow_stuck('1 hour') WHERE workflow_class LIKE 'ovs.%' GROUP BY 1$$,
              'a 1-hour stall threshold: what pgbus.workflow_stuck says');
-- as_of in the past changes the window, not "stuck now".
SELECT is((SELECT row(ongoing, stuck)::text FROM pgbus.workflow_definitions_overview('24h', as_of => now() - interval '2 hours')
           WHERE workflow_class = 'ovs.A'), row(1::bigint, 6::bigint)::text,
          'as_of 2 hours ago: one run of ovs.A was ongoing then (created 3 days ago), still 6 stuck now');
-- A run that ends leaves the count.
UPDATE pgbus.workflows SET status = 'cancelled', pause_cause = NULL, ended_at = now() WHERE workflow_id = pg_temp.id('a_stalled');
SELECT is((SELECT row(ongoing, stuck)::text FROM ov WHERE workflow_class = 'ovs.A'), row(12::bigint, 5::bigint)::text,
          'a stuck run cancelled: 12 ongoing, 5 stuck');

SELECT * FROM finish();
ROLLBACK;
