-- The workflow insights' spans: the rolled-up hours of a whole window (the last 24 h, 7 d and
-- 30 d of closed hours), merged once by pgbus.workflow_insights_rollup() when an hour closes,
-- so that a page reads one sorted list per class, step and revision for the bulk of its window
-- (and a few hours and the window's ragged ends beside it) instead of unnesting and sorting
-- every hour's values again. Exact: a span is the sum of its hours' rows, and it is read only
-- while every one of them is still rolled up as it was when the span was built (none forgotten,
-- none rolled up again since: pgbus.workflow_insights_span in sql/functions/500).

-- One list of values sorted ascending (a span's run times, an hour's, a window's live ones):
-- pgbus.insights_percentiles takes an array of them (arrays of different lengths cannot be one
-- two-dimensional array). sql/functions/500.
CREATE TYPE pgbus.insights_values AS (v double precision[]);

-- Each rollup and each span build takes the next number of this sequence: an hour rolled up
-- (again) after a span was built has a higher number than the span.
CREATE SEQUENCE pgbus.workflow_insights_rollup_seq;
ALTER TABLE pgbus.workflow_insights_hours ADD COLUMN rolled_seq bigint;  -- (NULL: before 0019)

-- The spans: [from_hour, to_hour), built from the hours rolled up as of number built_seq.
CREATE TABLE pgbus.workflow_insights_spans (
    span_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    from_hour  timestamptz NOT NULL,
    to_hour    timestamptz NOT NULL,
    built_seq  bigint NOT NULL,
    built_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflow_insights_spans_to_idx ON pgbus.workflow_insights_spans (to_hour, from_hour);

-- Runs that ended in the span, per class: pgbus.workflow_insights_run_hours summed, the
-- finished runs' durations merged (sorted), and how many fall in each bin of
-- pgbus.workflow_duration_bins().
CREATE TABLE pgbus.workflow_insights_span_runs (
    span_id         bigint NOT NULL REFERENCES pgbus.workflow_insights_spans ON DELETE CASCADE,
    workflow_class  text NOT NULL,
    finished        bigint NOT NULL,
    cancelled       bigint NOT NULL,
    durations       double precision[] NOT NULL,
    bins            bigint[] NOT NULL,
    PRIMARY KEY (span_id, workflow_class)
);

-- Attempts that ended in the span: pgbus.workflow_insights_attempt_hours summed per class,
-- step and app revision (per_revision; a NULL revision is a group too), and per class and step
-- over every revision (not per_revision), run times and pickups merged (sorted).
CREATE TABLE pgbus.workflow_insights_span_attempts (
    span_id       bigint NOT NULL REFERENCES pgbus.workflow_insights_spans ON DELETE CASCADE,
    run_class     text NOT NULL,
    step_name     text NOT NULL,
    app_revision  text,
    per_revision  boolean NOT NULL,
    n             bigint NOT NULL,
    failed        bigint NOT NULL,
    reattempted   bigint NOT NULL,
    skipped       bigint NOT NULL,
    first_id      bigint,
    first_seen    timestamptz,
    last_seen     timestamptz,
    run_times     double precision[] NOT NULL,
    pickups       double precision[] NOT NULL
);
CREATE INDEX workflow_insights_span_attempts_class_idx ON pgbus.workflow_insights_span_attempts (span_id, run_class);
