-- The workflow insights' rollup of closed hours (tables: sql/schema/0018). The insights
-- functions read a window's whole hours that are rolled up from pgbus.workflow_insights_run_hours
-- and pgbus.workflow_insights_attempt_hours, and everything else in the window live, from the
-- same expressions: the answers are the live query's, to the last digit (percentiles from the
-- sorted durations, not from histograms).

-- Forgets the rolled-up hours holding these times (NULLs ignored): `ended` the hours of runs
-- and attempts by their end, `created` the funnel's hours by a run's creation. The next rollup
-- does them again; until then the insights read them live.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_forget(ended timestamptz[], created timestamptz[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(pgbus.workflow_insights_lock_key());
    DELETE FROM pgbus.workflow_insights_hours h
    WHERE h.hour IN (SELECT pgbus.workflow_insights_hour(t) FROM unnest(ended) t WHERE t IS NOT NULL);
    DELETE FROM pgbus.workflow_insights_funnel_hours h
    WHERE h.hour IN (SELECT pgbus.workflow_insights_hour(t) FROM unnest(created) t WHERE t IS NOT NULL);
END;
$$;
DROP FUNCTION IF EXISTS pgbus.workflow_insights_forget(timestamptz[]);

-- The triggers of sql/schema/0018 (a row dated into the past written, an ended row changed or
-- deleted, a run of an earlier hour ended): the hours of its old and new end, and the funnel
-- hour of its run's creation (an attempt's run counts there only once ended). A bulk write
-- (an import of history) calls this once per row: the hours it forgot last in this
-- transaction are kept in the transaction-local setting pgbus.insights_forgot, and a row with
-- the same hours forgets nothing more (nothing can roll them up again before this transaction
-- ends: the rollup waits for the lock, and one run inside it clears the setting).
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_row_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ended timestamptz[];
    created timestamptz[];
    key text;
BEGIN
    ended := ARRAY[pgbus.workflow_insights_hour(CASE WHEN TG_OP <> 'INSERT' THEN OLD.ended_at END),
                   pgbus.workflow_insights_hour(CASE WHEN TG_OP <> 'DELETE' THEN NEW.ended_at END)];
    IF TG_TABLE_NAME = 'workflows' THEN
        created := ARRAY[pgbus.workflow_insights_hour(CASE WHEN TG_OP <> 'INSERT' THEN OLD.created_at END),
                         pgbus.workflow_insights_hour(CASE WHEN TG_OP <> 'DELETE' THEN NEW.created_at END)];
    ELSE
        created := ARRAY(SELECT pgbus.workflow_insights_hour(w.created_at) FROM pgbus.workflows w
                         WHERE w.workflow_id IN (CASE WHEN TG_OP <> 'INSERT' THEN OLD.workflow_id END,
                                                 CASE WHEN TG_OP <> 'DELETE' THEN NEW.workflow_id END)
                           AND w.ended_at IS NOT NULL);
    END IF;
    key := array_to_string(ended, ',', '-') || '|' || array_to_string(created, ',', '-');
    IF key IS NOT DISTINCT FROM current_setting('pgbus.insights_forgot', true) THEN
        RETURN NULL;
    END IF;
    PERFORM pgbus.workflow_insights_forget(ended, created);
    PERFORM set_config('pgbus.insights_forgot', key, true);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus.workflow_insights_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(pgbus.workflow_insights_lock_key());
    DELETE FROM pgbus.workflow_insights_hours;
    DELETE FROM pgbus.workflow_insights_funnel_hours;
    RETURN NULL;
END;
$$;

-- Every class name an ended attempt carries (run_class), read by skipping through
-- workflow_steps_class_ended_idx (one probe per class).
CREATE OR REPLACE FUNCTION pgbus.workflow_attempt_classes() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE c AS (
        SELECT min(s.run_class) AS cls FROM pgbus.workflow_steps s WHERE s.ended_at IS NOT NULL
        UNION ALL
        SELECT (SELECT min(s.run_class) FROM pgbus.workflow_steps s WHERE s.ended_at IS NOT NULL AND s.run_class > c.cls)
        FROM c WHERE c.cls IS NOT NULL
    )
    SELECT cls FROM c WHERE cls IS NOT NULL
$$;

-- Up to when hours are closed: now, or the start of the oldest other open transaction of
-- this database (or the moment the oldest prepared one was prepared) when earlier. pgbus dates
-- a row at or after its transaction's start, so every row dated before this moment that will
-- ever be committed by pgbus's functions is committed now.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_closed() RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    closed timestamptz;
BEGIN
    PERFORM pg_stat_clear_snapshot();  -- (pg_stat_activity as it is now, not as first read in this transaction)
    SELECT least(clock_timestamp(), min(a.xact_start),
                 (SELECT min(p.prepared) FROM pg_prepared_xacts p WHERE p.database = current_database()))
    INTO closed
    FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL;
    RETURN closed;
END;
$$;

-- The spans windows read (sql/schema/0019): for a window of 24 h, 7 d or 30 d, k = 2, 6 or 12
-- hours, [upto - window + k, upto), built from the rolled-up hours when every one of them is
-- rolled up. A window of that length ending up to k hours after `upto` holds the span whole
-- (and reads at most k + 1 other hours beside it), so a span is built again only when it has
-- one hour of use left: the 30-day one (the costly one: every value of 30 days merged) twice a
-- day. Spans that ended a day before `upto` or are no longer valid (an hour of theirs forgotten
-- or rolled up again) are dropped. Returns how many it built.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_build_spans(upto timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    want interval;
    spare interval;
    lo timestamptz;
    id bigint;
    built integer := 0;
BEGIN
    DELETE FROM pgbus.workflow_insights_spans s
    WHERE s.to_hour < upto - interval '24 hours' OR NOT pgbus.workflow_insights_span_valid(s);
    FOR want, spare IN SELECT * FROM (VALUES (interval '24 hours', interval '2 hours'), (interval '168 hours', interval '6 hours'),
                                             (interval '720 hours', interval '12 hours')) v(w, k) LOOP
        lo := upto - want + spare;
        IF EXISTS (SELECT 1 FROM pgbus.workflow_insights_spans s
                   WHERE s.to_hour - s.from_hour = want - spare AND s.to_hour <= upto
                     AND s.to_hour > upto - spare + interval '1 hour')
           OR (SELECT count(*) FROM pgbus.workflow_insights_hours h WHERE h.hour >= lo AND h.hour < upto)
              <> extract(epoch FROM upto - lo) / 3600 THEN
            CONTINUE;
        END IF;
        INSERT INTO pgbus.workflow_insights_spans (from_hour, to_hour, built_seq)
        VALUES (lo, upto, nextval('pgbus.workflow_insights_rollup_seq')) RETURNING span_id INTO id;
        -- (Each hour's lists gathered by hashing, then merged group by group: no sort of every
        -- value by its class's and step's names.)
        INSERT INTO pgbus.workflow_insights_span_runs (span_id, workflow_class, finished, cancelled, durations, bins)
        SELECT id, c.workflow_class, c.finished, c.cancelled, c.durations,
               -- (width_bucket over the bins' lower ends: i when lo_i <= secs < lo_i+1.)
               ARRAY(SELECT count(w.i)
                     FROM pgbus.workflow_duration_bins() b
                     LEFT JOIN (SELECT width_bucket(x, (SELECT array_agg(z.lo::double precision ORDER BY z.i)
                                                        FROM pgbus.workflow_duration_bins() z)) AS i
                                FROM unnest(c.durations) x) w ON w.i = b.i
                     GROUP BY b.i ORDER BY b.i)
        FROM (SELECT h.workflow_class, sum(h.finished)::bigint AS finished, sum(h.cancelled)::bigint AS cancelled,
                     pgbus.insights_merge(array_agg(ROW(h.durations)::pgbus.insights_values)) AS durations
              FROM pgbus.workflow_insights_run_hours h WHERE h.hour >= lo AND h.hour < upto
              GROUP BY h.workflow_class) c;
        INSERT INTO pgbus.workflow_insights_span_attempts
            (span_id, run_class, step_name, app_revision, per_revision, n, failed, reattempted, skipped,
             first_id, first_seen, last_seen, run_times, pickups)
        WITH revs AS MATERIALIZED (
            SELECT h.run_class, h.step_name, h.app_revision,
                   sum(h.n)::bigint AS n, sum(h.failed)::bigint AS failed,
                   sum(h.reattempted)::bigint AS reattempted, sum(h.skipped)::bigint AS skipped,
                   min(h.first_id) AS first_id, min(h.first_seen) AS first_seen, max(h.last_seen) AS last_seen,
                   pgbus.insights_merge(array_agg(ROW(h.run_times)::pgbus.insights_values)) AS run_times,
                   pgbus.insights_merge(array_agg(ROW(h.pickups)::pgbus.insights_values)) AS pickups
            FROM pgbus.workflow_insights_attempt_hours h
            WHERE h.hour >= lo AND h.hour < upto
            GROUP BY h.run_class, h.step_name, h.app_revision
        )
        SELECT id, r.run_class, r.step_name, r.app_revision, true, r.n, r.failed, r.reattempted, r.skipped,
               r.first_id, r.first_seen, r.last_seen, r.run_times, r.pickups
        FROM revs r
        UNION ALL
        SELECT id, r.run_class, r.step_name, NULL, false, sum(r.n)::bigint, sum(r.failed)::bigint,
               sum(r.reattempted)::bigint, sum(r.skipped)::bigint, min(r.first_id), min(r.first_seen), max(r.last_seen),
               pgbus.insights_merge(array_agg(ROW(r.run_times)::pgbus.insights_values)),
               pgbus.insights_merge(array_agg(ROW(r.pickups)::pgbus.insights_values))
        FROM revs r
        GROUP BY r.run_class, r.step_name;
        built := built + 1;
    END LOOP;
    RETURN built;
END;
$$;

-- Rolls up the closed hours of the last 30 days (and one hour; from `since` when given) not
-- rolled up yet, newest first, at most `max_hours` of them; forgets hours older than that. Closed: the hour ended
-- before now and before every other open transaction of the database began (and before every
-- prepared one was prepared): pgbus dates a row at or after its transaction's start, so no
-- row can still appear in a closed hour except by a write dated into the past, which forgets
-- it again (the triggers). Idempotent; runs at READ COMMITTED (each statement sees what
-- committed before it). Returns how many hours it rolled up (the
-- funnel's hours by creation and the others by end, counted apart).
DROP FUNCTION IF EXISTS pgbus.workflow_insights_rollup(integer);
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_rollup(max_hours integer DEFAULT 800, since timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    closed timestamptz;
    horizon timestamptz := pgbus.workflow_insights_hour(coalesce(since, now() - interval '721 hours'));
    todo tstzmultirange;
    n integer;
    done integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgbus: the insights rollup runs at READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    PERFORM pg_advisory_xact_lock(pgbus.workflow_insights_lock_key());
    -- (Hours forgotten earlier in this transaction may be rolled up again below: a later write
    -- into them must forget them again.)
    PERFORM set_config('pgbus.insights_forgot', '', true);
    closed := pgbus.workflow_insights_closed();
    DELETE FROM pgbus.workflow_insights_hours h WHERE h.hour < horizon;
    DELETE FROM pgbus.workflow_insights_funnel_hours h WHERE h.hour < horizon;
    n := pgbus.workflow_insights_rollup_funnel(horizon, closed, max_hours);
    WITH new AS (
        INSERT INTO pgbus.workflow_insights_hours (hour, rolled_seq)
        SELECT g, nextval('pgbus.workflow_insights_rollup_seq') FROM generate_series(horizon, closed - interval '1 hour', interval '1 hour') g
        WHERE NOT EXISTS (SELECT 1 FROM pgbus.workflow_insights_hours h WHERE h.hour = g)
        ORDER BY g DESC
        LIMIT greatest(max_hours, 0)
        RETURNING hour
    )
    SELECT count(*), coalesce(range_agg(tstzrange(new.hour, new.hour + interval '1 hour')), '{}') INTO done, todo FROM new;
    IF done = 0 THEN
        PERFORM pgbus.workflow_insights_build_spans(pgbus.workflow_insights_hour(closed));
        RETURN n;
    END IF;
    -- Runs: from workflows_ended_idx, range by range.
    INSERT INTO pgbus.workflow_insights_run_hours (workflow_class, hour, finished, cancelled, durations)
    SELECT w.workflow_class, pgbus.workflow_insights_hour(w.ended_at),
           count(*) FILTER (WHERE w.status = 'finished'), count(*) FILTER (WHERE w.status = 'cancelled'),
           coalesce(array_agg(w.secs ORDER BY w.secs) FILTER (WHERE w.status = 'finished'), '{}')
    FROM unnest(todo) r
    CROSS JOIN LATERAL (
        SELECT x.workflow_class, x.status, x.ended_at,
               extract(epoch FROM x.ended_at - x.created_at)::double precision AS secs
        FROM pgbus.workflows x
        WHERE x.ended_at >= lower(r) AND x.ended_at < upper(r)
    ) w
    GROUP BY 1, 2;
    -- Attempts: class by class (workflow_steps_class_ended_idx), through the live query's function.
    INSERT INTO pgbus.workflow_insights_attempt_hours
        (run_class, hour, step_name, app_revision, n, failed, reattempted, skipped, first_id, first_seen,
         last_seen, run_times, pickups)
    SELECT c.cls, pgbus.workflow_insights_hour(f.ended_at), f.step_name, f.app_revision, count(*),
           count(*) FILTER (WHERE f.failed), count(*) FILTER (WHERE f.reattempted),
           count(*) FILTER (WHERE f.skipped), min(f.step_id), min(f.seen), max(f.ended_at),
           coalesce(array_agg(f.run_time ORDER BY f.run_time) FILTER (WHERE f.run_time IS NOT NULL), '{}'),
           coalesce(array_agg(f.pickup ORDER BY f.pickup) FILTER (WHERE f.pickup IS NOT NULL), '{}')
    FROM pgbus.workflow_attempt_classes() c(cls)
    CROSS JOIN unnest(todo) r
    CROSS JOIN LATERAL pgbus.workflow_class_window_figures(c.cls, lower(r), upper(r)) f
    GROUP BY c.cls, 2, f.step_name, f.app_revision;
    PERFORM pgbus.workflow_insights_build_spans(pgbus.workflow_insights_hour(closed));
    RETURN n + done;
END;
$$;

-- The funnel's part of pgbus.workflow_insights_rollup: the closed hours from `horizon` not rolled
-- up yet (newest first, at most max_hours), each with the runs created in it that had ended
-- (finished or cancelled: they never change again), per class and per step, counted as
-- pgbus.workflow_class_funnel counts them. Returns how many hours.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_rollup_funnel(horizon timestamptz, closed timestamptz, max_hours integer)
RETURNS integer
LANGUAGE plpgsql
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    todo tstzmultirange;
    n integer;
BEGIN
    SELECT count(*), coalesce(range_agg(tstzrange(g, g + interval '1 hour')), '{}') INTO n, todo
    FROM (SELECT g FROM generate_series(horizon, closed - interval '1 hour', interval '1 hour') g
          WHERE NOT EXISTS (SELECT 1 FROM pgbus.workflow_insights_funnel_hours h WHERE h.hour = g)
          ORDER BY g DESC
          LIMIT greatest(max_hours, 0)) x;
    IF n = 0 THEN
        RETURN 0;
    END IF;
    CREATE TEMP TABLE IF NOT EXISTS pgbus_funnel_runs (
        workflow_id uuid, workflow_class text, status text, current_step text, current_step_id bigint,
        hour timestamptz) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS pgbus_funnel_firsts (
        workflow_id uuid, step_name text, step_id bigint, ended_at timestamptz, created_at timestamptz) ON COMMIT DROP;
    TRUNCATE pgbus_funnel_runs, pgbus_funnel_firsts;
    INSERT INTO pgbus_funnel_runs
    SELECT w.workflow_id, w.workflow_class, w.status, w.current_step, w.current_step_id,
           pgbus.workflow_insights_hour(w.created_at)
    FROM unnest(todo) r
    CROSS JOIN LATERAL (SELECT * FROM pgbus.workflows x
                        WHERE x.created_at >= lower(r) AND x.created_at < upper(r) AND x.ended_at IS NOT NULL) w;
    -- A run reached a step with a first attempt of it that ended, or that is open and its current one.
    INSERT INTO pgbus_funnel_firsts
    SELECT s.workflow_id, s.step_name, s.step_id, s.ended_at, s.created_at
    FROM pgbus_funnel_runs r JOIN pgbus.workflow_steps s ON s.workflow_id = r.workflow_id
    WHERE s.attempt = 1 AND (s.ended_at IS NOT NULL OR s.step_id = r.current_step_id);
    INSERT INTO pgbus.workflow_insights_funnel_hours (hour, first_ended, last_created)
    SELECT g, sp.first_ended, sp.last_created
    FROM unnest(todo) t
    CROSS JOIN LATERAL generate_series(lower(t), upper(t) - interval '1 hour', interval '1 hour') g
    LEFT JOIN (SELECT r.hour, min(f.ended_at) AS first_ended, max(f.created_at) AS last_created
               FROM pgbus_funnel_runs r JOIN pgbus_funnel_firsts f USING (workflow_id)
               GROUP BY r.hour) sp ON sp.hour = g;
    INSERT INTO pgbus.workflow_insights_funnel_runs (workflow_class, hour, finished, cancelled)
    SELECT r.workflow_class, r.hour, count(*) FILTER (WHERE r.status = 'finished'),
           count(*) FILTER (WHERE r.status = 'cancelled')
    FROM pgbus_funnel_runs r GROUP BY 1, 2;
    INSERT INTO pgbus.workflow_insights_funnel_steps (workflow_class, hour, step_name, reached, first_id, cancelled)
    SELECT coalesce(a.workflow_class, h.workflow_class), coalesce(a.hour, h.hour), coalesce(a.step_name, h.step_name),
           coalesce(a.reached, 0), a.first_id, coalesce(h.cancelled, 0)
    FROM (SELECT r.workflow_class, r.hour, f.step_name, count(*) AS reached, min(f.step_id) AS first_id
          FROM pgbus_funnel_runs r JOIN pgbus_funnel_firsts f USING (workflow_id)
          GROUP BY 1, 2, 3) a
    FULL JOIN (SELECT r.workflow_class, r.hour, r.current_step AS step_name,
                      count(*) FILTER (WHERE r.status = 'cancelled') AS cancelled
               FROM pgbus_funnel_runs r WHERE r.current_step IS NOT NULL AND r.status <> 'finished'
               GROUP BY 1, 2, 3) h
      ON h.workflow_class = a.workflow_class AND h.hour = a.hour AND h.step_name = a.step_name;
    RETURN n;
END;
$$;
