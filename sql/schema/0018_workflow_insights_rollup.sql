-- The workflow insights' rollup: the runs and the attempts that ended in each closed hour,
-- per class (and per step and app revision), with their counts and their durations sorted,
-- written by pgbus.workflow_insights_rollup() (the dispatcher's workflow_insights_rollup duty,
-- or pg_cron). The insights functions read a window's whole hours from here when they are
-- rolled up and the rest of the window (its ragged ends, the hours not rolled up yet) live, so
-- every answer is the one the live query gives. The rules (sql/functions/530): an hour is
-- rolled up only once no open transaction began before its end, rows of pgbus never change
-- once they ended, and any write dated into the past (an import, a test's fixture, a change to
-- an ended row, a delete) forgets the rolled-up hours it touches (triggers below).

-- The hours rolled up: [hour, hour + 1 h), aligned on UTC hours. Forgetting an hour (deleting
-- its row) forgets its figures (ON DELETE CASCADE).
CREATE TABLE pgbus.workflow_insights_hours (
    hour       timestamptz PRIMARY KEY,
    rolled_at  timestamptz NOT NULL DEFAULT now()
);

-- Runs that ended in the hour, per class: finished and cancelled, and the end-to-end durations
-- (created -> ended, seconds, as the live query computes them) of the finished ones, sorted.
CREATE TABLE pgbus.workflow_insights_run_hours (
    workflow_class  text NOT NULL,
    hour            timestamptz NOT NULL REFERENCES pgbus.workflow_insights_hours ON DELETE CASCADE,
    finished        bigint NOT NULL,
    cancelled       bigint NOT NULL,
    durations       double precision[] NOT NULL,
    PRIMARY KEY (workflow_class, hour)
);
CREATE INDEX workflow_insights_run_hours_hour_idx ON pgbus.workflow_insights_run_hours (hour);

-- Attempts (superseded ones left out) that ended in the hour, per class, step and app
-- revision: pgbus.workflow_class_window_figures' rows summed (counts, first step id, first
-- seen, last ended) with their run times and pickup latencies, sorted.
CREATE TABLE pgbus.workflow_insights_attempt_hours (
    run_class     text NOT NULL,
    hour          timestamptz NOT NULL REFERENCES pgbus.workflow_insights_hours ON DELETE CASCADE,
    step_name     text NOT NULL,
    app_revision  text,
    n             bigint NOT NULL,
    failed        bigint NOT NULL,
    reattempted   bigint NOT NULL,
    skipped       bigint NOT NULL,
    first_id      bigint NOT NULL,
    first_seen    timestamptz,
    last_seen     timestamptz,
    run_times     double precision[] NOT NULL,
    pickups       double precision[] NOT NULL
);
CREATE INDEX workflow_insights_attempt_hours_class_idx ON pgbus.workflow_insights_attempt_hours (run_class, hour);
CREATE INDEX workflow_insights_attempt_hours_hour_idx ON pgbus.workflow_insights_attempt_hours (hour);

-- The funnel's runs by the hour they were created (a funnel counts the runs started in the
-- window): the hours rolled up, each with the span of the counted attempts' times (a window uses
-- the hour only when the span lies inside it, as the live query's bounds would count them all).
CREATE TABLE pgbus.workflow_insights_funnel_hours (
    hour             timestamptz PRIMARY KEY,
    first_ended      timestamptz,
    last_created     timestamptz,
    rolled_at        timestamptz NOT NULL DEFAULT now()
);
-- Runs created in the hour that had ended when it was rolled up (ended runs never change; a run
-- of the hour that ends later forgets the hour), per class: finished, cancelled.
CREATE TABLE pgbus.workflow_insights_funnel_runs (
    workflow_class  text NOT NULL,
    hour            timestamptz NOT NULL REFERENCES pgbus.workflow_insights_funnel_hours ON DELETE CASCADE,
    finished        bigint NOT NULL,
    cancelled       bigint NOT NULL,
    PRIMARY KEY (workflow_class, hour)
);
CREATE INDEX workflow_insights_funnel_runs_hour_idx ON pgbus.workflow_insights_funnel_runs (hour);
-- The same runs per step: how many reached it (a first attempt), the first such attempt's id,
-- and how many were cancelled at it.
CREATE TABLE pgbus.workflow_insights_funnel_steps (
    workflow_class  text NOT NULL,
    hour            timestamptz NOT NULL REFERENCES pgbus.workflow_insights_funnel_hours ON DELETE CASCADE,
    step_name       text NOT NULL,
    reached         bigint NOT NULL,
    first_id        bigint,
    cancelled       bigint NOT NULL
);
CREATE INDEX workflow_insights_funnel_steps_class_idx ON pgbus.workflow_insights_funnel_steps (workflow_class, hour);
CREATE INDEX workflow_insights_funnel_steps_hour_idx ON pgbus.workflow_insights_funnel_steps (hour);

-- First versions of the trigger function (its body: sql/functions/530, re-applied by every
-- migrate), so that the triggers can be created here.
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_row_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbus.workflow_insights_hours;
    DELETE FROM pgbus.workflow_insights_funnel_hours;
    RETURN NULL;
END;
$$;
CREATE OR REPLACE FUNCTION pgbus.workflow_insights_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbus.workflow_insights_hours;
    DELETE FROM pgbus.workflow_insights_funnel_hours;
    RETURN NULL;
END;
$$;

-- Which writes can touch a rolled-up hour. pgbus's own writes date a row at or after their
-- transaction's start (now() or clock_timestamp()), and an attempt or a run that ended is never
-- changed again: none of them pass these WHEN conditions except the end of a run created in an
-- earlier hour than its end's transaction began (its funnel hour may be rolled up), so the step
-- hot path never calls the function (each condition compares the row's own columns). What
-- passes: a row inserted with a time before its transaction began, an update that dates a row
-- so or changes a row that had ended, and the delete of a row that had ended (the sweep's old
-- runs, with their attempts).
CREATE TRIGGER workflow_steps_insights_insert AFTER INSERT ON pgbus.workflow_steps
    FOR EACH ROW WHEN (NEW.ended_at < now() OR NEW.created_at < now())
    EXECUTE FUNCTION pgbus.workflow_insights_row_changed();
CREATE TRIGGER workflow_steps_insights_update AFTER UPDATE ON pgbus.workflow_steps
    FOR EACH ROW WHEN (OLD.ended_at IS NOT NULL OR NEW.ended_at < now() OR NEW.created_at IS DISTINCT FROM OLD.created_at)
    EXECUTE FUNCTION pgbus.workflow_insights_row_changed();
CREATE TRIGGER workflow_steps_insights_delete AFTER DELETE ON pgbus.workflow_steps
    FOR EACH ROW WHEN (OLD.ended_at IS NOT NULL)
    EXECUTE FUNCTION pgbus.workflow_insights_row_changed();
CREATE TRIGGER workflows_insights_insert AFTER INSERT ON pgbus.workflows
    FOR EACH ROW WHEN (NEW.ended_at < now() OR NEW.created_at < now())
    EXECUTE FUNCTION pgbus.workflow_insights_row_changed();
CREATE TRIGGER workflows_insights_update AFTER UPDATE ON pgbus.workflows
    FOR EACH ROW WHEN (OLD.ended_at IS NOT NULL OR NEW.ended_at < now()
                       OR NEW.created_at IS DISTINCT FROM OLD.created_at
                       OR (OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL
                           AND NEW.created_at < date_bin(interval '1 hour', now(), timestamptz '2000-01-01 00:00:00+00')))
    EXECUTE FUNCTION pgbus.workflow_insights_row_changed();
CREATE TRIGGER workflows_insights_delete AFTER DELETE ON pgbus.workflows
    FOR EACH ROW WHEN (OLD.ended_at IS NOT NULL)
    EXECUTE FUNCTION pgbus.workflow_insights_row_changed();
CREATE TRIGGER workflow_steps_insights_truncate AFTER TRUNCATE ON pgbus.workflow_steps
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus.workflow_insights_truncated();
CREATE TRIGGER workflows_insights_truncate AFTER TRUNCATE ON pgbus.workflows
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus.workflow_insights_truncated();
