-- The dashboard's workflow pages: the run list with its filters, one run's detail, the runs
-- that need attention grouped, the bulk resume/cancel of one group, and the home card. Each
-- page reads one of these (and MCP may too); the words live in the dashboard's templates, the
-- facts behind them here. Stuck runs are always what pgbus.workflow_stuck says (the gauge
-- reads it too): one classification, used by the gauge, the attention page and the bulk loop.

-- The facts behind one run's row: its sentence kind ('finished', 'cancelled', 'paused_error',
-- 'paused_stall', 'paused_manual', 'running', 'waiting_batch', 'waiting_signal', 'waiting',
-- 'overdue', 'scheduled', 'queued') and what the sentence needs.
CREATE OR REPLACE FUNCTION pgbus.workflow_row_facts(
    w pgbus.workflows, s pgbus.workflow_steps, overdue_after interval
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    b pgbus.batches;
    kind text;
BEGIN
    IF s.batch_id IS NOT NULL THEN
        SELECT * INTO b FROM pgbus.batches x WHERE x.batch_id = s.batch_id;
    END IF;
    kind := CASE
        WHEN w.status = 'finished' THEN 'finished'
        WHEN w.status = 'cancelled' THEN 'cancelled'
        WHEN w.status = 'paused' THEN 'paused_' || CASE w.pause_cause WHEN 'error' THEN 'error'
                                                                      WHEN 'stall' THEN 'stall'
                                                                      ELSE 'manual' END
        WHEN w.status = 'running' THEN 'running'
        WHEN w.status = 'waiting' AND s.batch_id IS NOT NULL THEN 'waiting_batch'
        WHEN w.status = 'waiting' AND s.wait_for IS NOT NULL THEN 'waiting_signal'
        WHEN w.status = 'waiting' THEN 'waiting'
        WHEN s.status = 'scheduled' AND s.scheduled_at < now() - overdue_after THEN 'overdue'
        WHEN s.status = 'scheduled' AND s.scheduled_at > clock_timestamp() THEN 'scheduled'
        ELSE 'queued'
    END;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'kind', kind,
        'step', w.current_step,
        'step_status', s.status,
        'attempt', s.attempt,
        'error_class', s.error_class,
        'error_message', s.error ->> 'message',
        'scheduled_at', s.scheduled_at,
        'started_at', s.started_at,
        'due_seconds', extract(epoch FROM s.scheduled_at - clock_timestamp()),
        'overdue_seconds', CASE WHEN kind = 'overdue' THEN extract(epoch FROM clock_timestamp() - s.scheduled_at) END,
        'running_seconds', CASE WHEN kind = 'running' THEN extract(epoch FROM clock_timestamp() - s.started_at) END,
        'wait_for', s.wait_for,
        'waiting_since', s.waiting_since,
        'timeout_seconds', CASE WHEN s.wait_deadline IS NOT NULL THEN extract(epoch FROM s.wait_deadline - clock_timestamp())
                                WHEN s.wait_remaining IS NOT NULL THEN extract(epoch FROM s.wait_remaining) END,
        'batch_id', s.batch_id,
        'batch_label', CASE WHEN s.batch_id IS NOT NULL
                            THEN coalesce(nullif(b.description, ''), w.workflow_class || '#' || s.step_name) END,
        'batch_done', b.completed_jobs + b.discarded_jobs,
        'batch_total', b.total_jobs,
        'batch_status', b.status,
        'paused_since', CASE WHEN w.status = 'paused' THEN w.updated_at END,
        'ended_at', w.ended_at));
END;
$$;

-- One page of runs, newest first (created_at, then workflow_id, descending), after the keyset
-- cursor (before_created, before_id). status: 'ongoing' (default: not finished or cancelled),
-- 'all', or one status. Every filter is optional and they combine. An unknown status raises
-- 22023. Each row: the run's columns, subject, whether it started on an older definition, and
-- its facts (pgbus.workflow_row_facts).
CREATE OR REPLACE FUNCTION pgbus.workflow_list(
    only_status text DEFAULT 'ongoing',
    only_class text DEFAULT NULL,
    only_step text DEFAULT NULL,
    only_error_class text DEFAULT NULL,
    only_subject_type text DEFAULT NULL,
    only_subject_id text DEFAULT NULL,
    only_run uuid DEFAULT NULL,
    created_from timestamptz DEFAULT NULL,
    created_to timestamptz DEFAULT NULL,
    ended_from timestamptz DEFAULT NULL,
    ended_to timestamptz DEFAULT NULL,
    before_created timestamptz DEFAULT NULL,
    before_id uuid DEFAULT NULL,
    page_size integer DEFAULT 25,
    overdue_after interval DEFAULT interval '5 minutes'
) RETURNS TABLE (workflow_id uuid, workflow_class text, subject_type text, subject_id text,
                 status text, pause_cause text, current_step text, created_at timestamptz,
                 updated_at timestamptz, ended_at timestamptz, rerun_of uuid,
                 definition_outdated boolean, facts jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q text;
BEGIN
    q := 'SELECT w.workflow_id, w.workflow_class, w.subject_type, w.subject_id, w.status, w.pause_cause,'
         ' w.current_step, w.created_at, w.updated_at, w.ended_at, w.rerun_of,'
         ' (d.digest IS DISTINCT FROM w.definition_digest),'
         ' pgbus.workflow_row_facts(w, s, $15)'
         ' FROM (SELECT w.* FROM pgbus.workflows w'
         || pgbus.workflow_list_where(only_status, only_class, only_step, only_error_class, only_subject_type,
                                      only_subject_id, only_run, created_from, created_to, ended_from,
                                      ended_to, before_created, before_id)
         || ' ORDER BY w.created_at DESC, w.workflow_id DESC LIMIT $14) w'
         ' LEFT JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id'
         ' LEFT JOIN pgbus.workflow_definitions d ON d.workflow_class = w.workflow_class'
         ' ORDER BY w.created_at DESC, w.workflow_id DESC';
    RETURN QUERY EXECUTE q
        USING only_status, only_class, only_step, only_error_class, only_subject_type, only_subject_id,
              only_run, created_from, created_to, ended_from, ended_to, before_created,
              before_id, greatest(1, least(coalesce(page_size, 25), 501)), overdue_after;
END;
$$;

-- How many runs the same filters match, counting no further than `cap` + 1 (the page shows
-- "10,000+" then): never an unbounded count.
CREATE OR REPLACE FUNCTION pgbus.workflow_list_count(
    only_status text DEFAULT 'ongoing',
    only_class text DEFAULT NULL,
    only_step text DEFAULT NULL,
    only_error_class text DEFAULT NULL,
    only_subject_type text DEFAULT NULL,
    only_subject_id text DEFAULT NULL,
    only_run uuid DEFAULT NULL,
    created_from timestamptz DEFAULT NULL,
    created_to timestamptz DEFAULT NULL,
    ended_from timestamptz DEFAULT NULL,
    ended_to timestamptz DEFAULT NULL,
    cap integer DEFAULT 10000
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM pgbus.workflows w'
            || pgbus.workflow_list_where(only_status, only_class, only_step, only_error_class, only_subject_type,
                                         only_subject_id, only_run, created_from, created_to, ended_from,
                                         ended_to, NULL, NULL)
            || ' LIMIT $14) c'
        INTO n
        USING only_status, only_class, only_step, only_error_class, only_subject_type, only_subject_id,
              only_run, created_from, created_to, ended_from, ended_to, NULL::timestamptz,
              NULL::uuid, greatest(coalesce(cap, 10000), 1) + 1;
    RETURN jsonb_build_object('count', least(n, greatest(coalesce(cap, 10000), 1)),
                              'capped', n > greatest(coalesce(cap, 10000), 1));
END;
$$;

-- The WHERE clause of the list and its count: only the filters given, so each call is planned
-- for what it asks ($1..$13 are the filters in the order of workflow_list's arguments).
CREATE OR REPLACE FUNCTION pgbus.workflow_list_where(
    status text, workflow_class text, current_step text, error_class text, subject_type text,
    subject_id text, workflow_id uuid, created_from timestamptz, created_to timestamptz,
    ended_from timestamptz, ended_to timestamptz, before_created timestamptz, before_id uuid
) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    c text[] := '{}';
BEGIN
    status := coalesce(status, 'ongoing');
    IF status = 'ongoing' THEN
        c := c || ARRAY['w.ended_at IS NULL'];
    ELSIF status = 'paused' THEN
        -- (pause_cause is set exactly while paused: workflows_paused_recent_idx reads a page
        -- newest first, and the count, alone; workflows_paused_idx by class.)
        c := c || ARRAY['w.pause_cause IS NOT NULL', 'w.ended_at IS NULL'];
    ELSIF status IN ('ready', 'running', 'waiting') THEN
        c := c || ARRAY['w.ended_at IS NULL', 'w.status = $1'];
    ELSIF status IN ('finished', 'cancelled') THEN
        c := c || ARRAY['w.ended_at IS NOT NULL', 'w.status = $1'];
    ELSIF status <> 'all' THEN
        RAISE EXCEPTION 'pgbus: % is not a run status (ongoing, all, ready, running, waiting, paused, finished, cancelled)',
                        quote_literal(status) USING ERRCODE = '22023';
    END IF;
    IF (subject_type IS NULL) <> (subject_id IS NULL) THEN
        RAISE EXCEPTION 'pgbus: a subject filter needs both its type and its id' USING ERRCODE = '22023';
    END IF;
    IF workflow_class IS NOT NULL THEN c := c || ARRAY['w.workflow_class = $2']; END IF;
    IF current_step IS NOT NULL THEN c := c || ARRAY['w.current_step = $3']; END IF;
    IF error_class IS NOT NULL THEN
        -- The current attempt's error class, kept on the run: workflows_error_class_ongoing_idx
        -- for ongoing runs (the default status), workflows_error_class_recent_idx for all.
        c := c || ARRAY['w.error_class = $4'];
    END IF;
    IF subject_type IS NOT NULL THEN
        c := c || ARRAY['w.subject_id IS NOT NULL', 'w.subject_type = $5', 'w.subject_id = $6'];
    END IF;
    IF workflow_id IS NOT NULL THEN c := c || ARRAY['w.workflow_id = $7']; END IF;
    IF created_from IS NOT NULL THEN c := c || ARRAY['w.created_at >= $8']; END IF;
    IF created_to IS NOT NULL THEN c := c || ARRAY['w.created_at < $9']; END IF;
    IF ended_from IS NOT NULL THEN c := c || ARRAY['w.ended_at >= $10']; END IF;
    IF ended_to IS NOT NULL THEN
        -- A run ends after it was created: the created-at bound lets the newest-first scan
        -- start at ended_to instead of at the newest run.
        c := c || ARRAY['w.ended_at < $11', 'w.created_at < $11'];
    END IF;
    IF ended_from IS NOT NULL OR ended_to IS NOT NULL THEN c := c || ARRAY['w.ended_at IS NOT NULL']; END IF;
    IF before_created IS NOT NULL AND before_id IS NOT NULL THEN
        c := c || ARRAY['(w.created_at, w.workflow_id) < ($12, $13)'];
    END IF;
    IF cardinality(c) = 0 THEN
        RETURN '';
    END IF;
    RETURN ' WHERE ' || array_to_string(c, ' AND ');
END;
$$;

-- Everything the run's page shows, or NULL for an unknown id: "run" (its list row), "arguments",
-- "attempts" (each with worker, revision, error, and its timeline segments waited / queued /
-- ran / waiting in seconds), "pauses" (segments between a pause and what ended it), "signals",
-- "events", "batches" (fan-out progress), "actions" (pgbus.workflow_available_actions),
-- "steps" (the definition's step names, for resume at), "rerun_of" and "reruns".
CREATE OR REPLACE FUNCTION pgbus.workflow_detail(
    workflow_id uuid, overdue_after interval DEFAULT interval '5 minutes'
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    w pgbus.workflows;
    row_ jsonb;
BEGIN
    SELECT * INTO w FROM pgbus.workflows x WHERE x.workflow_id = workflow_detail.workflow_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT to_jsonb(l) INTO row_
    FROM pgbus.workflow_list('all', only_run => w.workflow_id, overdue_after => overdue_after) l;
    RETURN jsonb_build_object(
        'run', row_,
        'arguments', w.arguments,
        'now', clock_timestamp(),
        'max_payload_size', pgbus.workflow_max_payload_size(),
        'attempts', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'step_id', s.step_id, 'step_name', s.step_name, 'attempt', s.attempt,
                'status', s.status, 'outcome', s.outcome, 'queue', s.queue,
                'created_at', s.created_at, 'scheduled_at', s.scheduled_at,
                'started_at', s.started_at, 'ended_at', s.ended_at,
                'waited', extract(epoch FROM greatest(s.scheduled_at - s.created_at, interval '0')),
                'queued', extract(epoch FROM coalesce(s.started_at, CASE WHEN s.ended_at IS NULL AND s.status = 'scheduled' AND s.scheduled_at < clock_timestamp() THEN clock_timestamp() END)
                                             - greatest(s.scheduled_at, s.created_at)),
                'ran', extract(epoch FROM coalesce(s.ended_at, CASE WHEN s.status = 'running' THEN clock_timestamp() END) - s.started_at),
                'waiting', extract(epoch FROM coalesce(s.ended_at, clock_timestamp()) - s.waiting_since),
                'wait_for', s.wait_for, 'batch_id', s.batch_id, 'timed_out', s.timed_out,
                'worker', coalesce(s.worker, s.error ->> 'worker'),
                'app_revision', coalesce(s.app_revision, s.error ->> 'app_revision'),
                'error_class', s.error_class, 'error_message', s.error ->> 'message',
                'backtrace', s.error -> 'backtrace', 'causes', s.error -> 'causes',
                'output', s.output) ORDER BY s.step_id)
            FROM pgbus.workflow_steps s WHERE s.workflow_id = w.workflow_id), '[]'),
        'pauses', coalesce((
            SELECT jsonb_agg(jsonb_build_object('from', p.created_at, 'to', p.until,
                                                'seconds', extract(epoch FROM coalesce(p.until, clock_timestamp()) - p.created_at),
                                                'actor', p.actor) ORDER BY p.event_id)
            FROM (SELECT e.event_id, e.created_at, e.actor,
                         (SELECT min(r.created_at) FROM pgbus.workflow_events r
                          WHERE r.workflow_id = e.workflow_id AND r.event_id > e.event_id
                            AND r.event IN ('resumed', 'resumed_at', 'cancelled', 'finished')) AS until
                  FROM pgbus.workflow_events e
                  WHERE e.workflow_id = w.workflow_id AND e.event = 'paused') p), '[]'),
        'signals', coalesce((
            SELECT jsonb_agg(to_jsonb(g) ORDER BY g.signal_id)
            FROM pgbus.workflow_signals g WHERE g.workflow_id = w.workflow_id), '[]'),
        'events', coalesce((
            SELECT jsonb_agg(jsonb_build_object('event_id', e.event_id, 'event', e.event, 'actor', e.actor,
                                                'reason', e.reason, 'details', e.details,
                                                'created_at', e.created_at,
                                                'step_name', st.step_name) ORDER BY e.event_id)
            FROM pgbus.workflow_events e
            LEFT JOIN pgbus.workflow_steps st ON st.step_id = e.step_id
            WHERE e.workflow_id = w.workflow_id), '[]'),
        'batches', coalesce((
            SELECT jsonb_agg(jsonb_build_object('batch_id', b.batch_id, 'step_name', s.step_name,
                                                'description', b.description, 'status', b.status,
                                                'total', b.total_jobs, 'completed', b.completed_jobs,
                                                'discarded', b.discarded_jobs) ORDER BY s.step_id)
            FROM pgbus.workflow_steps s JOIN pgbus.batches b ON b.batch_id = s.batch_id
            WHERE s.workflow_id = w.workflow_id), '[]'),
        'actions', to_jsonb(pgbus.workflow_available_actions(w.workflow_id)),
        'steps', coalesce((
            SELECT jsonb_agg(x ->> 'name' ORDER BY o)
            FROM pgbus.workflow_definitions d, jsonb_array_elements(d.steps) WITH ORDINALITY AS t(x, o)
            WHERE d.workflow_class = w.workflow_class
              AND NOT coalesce((x ->> 'removed')::boolean, false)), '[]'),
        'rerun_of', w.rerun_of,
        'reruns', coalesce((
            SELECT jsonb_agg(jsonb_build_object('workflow_id', r.workflow_id, 'status', r.status,
                                                'created_at', r.created_at) ORDER BY r.created_at)
            FROM pgbus.workflows r WHERE r.rerun_of = w.workflow_id), '[]'));
END;
$$;

-- The reasons pgbus.workflow_stuck gives (a group naming another one is forged).
CREATE OR REPLACE FUNCTION pgbus.workflow_stuck_reasons() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['paused_error', 'stalled', 'paused_manual', 'overdue', 'waiting_overdue']
$$;

-- Every stuck run (pgbus.workflow_stuck), grouped by class, step, reason and error class: how
-- many, first and last seen (the oldest and newest "since"), and the newest error's message
-- (that of the newest run in the group whose current attempt has an error class: grouped
-- first, then one look-up per group). Unordered; a plain SELECT, inlined into its callers' plans.
CREATE OR REPLACE FUNCTION pgbus.workflow_attention_groups(
    only_class text, stall_threshold interval, overdue_after interval, waiting_threshold interval
) RETURNS TABLE (workflow_class text, step_name text, reason text, error_class text,
                 runs bigint, first_seen timestamptz, last_seen timestamptz, newest_error text)
LANGUAGE sql STABLE AS $$
    SELECT g.workflow_class, g.step_name, g.reason, g.error_class, g.runs, g.first_seen, g.last_seen,
           (SELECT s.error ->> 'message'
            FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
            WHERE w.workflow_id = g.newest_failed)
    FROM (SELECT x.workflow_class, x.step_name, x.reason, x.error_class, count(*) AS runs,
                 min(x.since) AS first_seen, max(x.since) AS last_seen,
                 (array_agg(x.workflow_id ORDER BY x.since DESC NULLS LAST)
                      FILTER (WHERE x.error_class IS NOT NULL))[1] AS newest_failed
          FROM pgbus.workflow_stuck(stall_threshold, overdue_after, waiting_threshold, only_class) x
          GROUP BY 1, 2, 3, 4) g
$$;

-- The attention groups (pgbus.workflow_attention_groups), the largest first. With only_class,
-- only that class's stuck runs are read (workflow_stuck's only_class).
CREATE OR REPLACE FUNCTION pgbus.workflow_attention(
    only_class text DEFAULT NULL,
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS TABLE (workflow_class text, step_name text, reason text, error_class text,
                 runs bigint, first_seen timestamptz, last_seen timestamptz, newest_error text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF only_class IS NULL THEN
        -- Every class (the page's default): a static query, so its plan is cached with the
        -- session (planning the inlined pgbus.workflow_stuck costs about as much as reading a
        -- thousand of its rows; the thresholds are parameters of that plan, the class is none).
        RETURN QUERY
            SELECT * FROM pgbus.workflow_attention_groups(NULL, stall_threshold, overdue_after, waiting_threshold) g
            ORDER BY g.runs DESC, 1, 2, 3, 4;
        RETURN;
    END IF;
    -- One class: planned on each call for it (EXECUTE): a plan cached for any class (as a
    -- prepared statement's or a static query's is after a few calls) reads every class's runs.
    RETURN QUERY EXECUTE
        'SELECT * FROM pgbus.workflow_attention_groups($1, $2, $3, $4) g ORDER BY g.runs DESC, 1, 2, 3, 4'
    USING only_class, stall_threshold, overdue_after, waiting_threshold;
END;
$$;

-- Resume or cancel (verb) up to max_runs of one attention group, oldest first, each through
-- its own guarded transition (pgbus.workflow_command, under the run's row lock) after checking,
-- under that lock, that the run is still in the group. Answers {"ok": true, "done",
-- "moved_on" (no longer in the group: a worker or an operator got there first), "failed"
-- (refused by the transition), "more_may_wait" (the cap was reached), "message"}, or a refusal
-- {"ok": false, "code": "invalid"} for a forged group (unknown verb or reason, blank class),
-- which changes nothing.
CREATE OR REPLACE FUNCTION pgbus.workflow_attention_act(
    verb text, workflow_class text, step_name text, reason text, error_class text,
    actor text DEFAULT NULL, why text DEFAULT NULL, max_runs integer DEFAULT 500,
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days'
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    id uuid;
    candidates uuid[];
    done_ integer := 0;
    moved integer := 0;
    failed integer := 0;
    answer jsonb;
    lim integer := greatest(1, least(coalesce(max_runs, 500), 500));
    msg text;
BEGIN
    PERFORM pgbus.check_actor_reason(actor, why);
    IF verb IS NULL OR verb NOT IN ('resume', 'cancel') THEN
        RETURN jsonb_build_object('ok', false, 'code', 'invalid',
                                  'message', 'Only resume and cancel act on a group');
    END IF;
    IF workflow_class IS NULL OR btrim(workflow_class) = '' OR reason IS NULL
       OR reason <> ALL (pgbus.workflow_stuck_reasons()) THEN
        RETURN jsonb_build_object('ok', false, 'code', 'invalid', 'message', 'No such group');
    END IF;
    -- (Planned for this group's class on each call, as pgbus.workflow_attention is.)
    EXECUTE $q$
        SELECT array_agg(x.workflow_id ORDER BY x.since, x.workflow_id)
        FROM (SELECT k.workflow_id, k.since
              FROM pgbus.workflow_stuck($1, $2, $3, $4) k
              WHERE k.step_name IS NOT DISTINCT FROM $5 AND k.reason = $6
                AND k.error_class IS NOT DISTINCT FROM $7
              ORDER BY k.since, k.workflow_id
              LIMIT $8) x
    $q$ INTO candidates
    USING stall_threshold, overdue_after, waiting_threshold, workflow_attention_act.workflow_class,
          workflow_attention_act.step_name, workflow_attention_act.reason,
          workflow_attention_act.error_class, lim;
    FOREACH id IN ARRAY coalesce(candidates, '{}') LOOP
        PERFORM 1 FROM pgbus.workflows w WHERE w.workflow_id = id FOR UPDATE;
        -- Still in the group, now that nobody else can move it?
        IF NOT EXISTS (
            SELECT 1 FROM pgbus.workflow_stuck(stall_threshold, overdue_after, waiting_threshold,
                                               workflow_attention_act.workflow_class) k
            WHERE k.workflow_id = id
              AND k.step_name IS NOT DISTINCT FROM workflow_attention_act.step_name
              AND k.reason = workflow_attention_act.reason
              AND k.error_class IS NOT DISTINCT FROM workflow_attention_act.error_class) THEN
            moved := moved + 1;
            CONTINUE;
        END IF;
        answer := pgbus.workflow_command(id, verb, actor, why);
        IF (answer ->> 'ok')::boolean THEN
            done_ := done_ + 1;
        ELSE
            failed := failed + 1;
        END IF;
    END LOOP;
    msg := CASE verb WHEN 'resume' THEN 'Resumed ' ELSE 'Cancelled ' END || done_
           || CASE WHEN moved > 0 THEN format('; %s had already moved on', moved) ELSE '' END
           || CASE WHEN failed > 0 THEN format('; %s refused', failed) ELSE '' END
           || CASE WHEN cardinality(candidates) >= lim THEN '; more may wait' ELSE '' END;
    RETURN jsonb_build_object('ok', true, 'done', done_, 'moved_on', moved, 'failed', failed,
                              'more_may_wait', coalesce(cardinality(candidates) >= lim, false),
                              'message', msg);
END;
$$;

-- The home page's card: ongoing runs, how many of them paused, how many need attention. Each
-- count stops at its cap (ongoing and paused at `cap`, attention at `attention_cap`) with
-- "capped" saying which did: {"ongoing", "paused", "attention", "capped": {"ongoing", "paused",
-- "attention"}}. Paused runs count first among the stuck, so a card over many stuck runs costs
-- no more than attention_cap look-ups.
-- (Its earlier signature, without the caps.)
DROP FUNCTION IF EXISTS pgbus.workflow_home_card(interval, interval, interval);

CREATE OR REPLACE FUNCTION pgbus.workflow_home_card(
    stall_threshold interval DEFAULT interval '15 minutes',
    overdue_after interval DEFAULT interval '5 minutes',
    waiting_threshold interval DEFAULT interval '7 days',
    cap integer DEFAULT 10000,
    attention_cap integer DEFAULT 1000
) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    lim integer := greatest(coalesce(cap, 10000), 1);
    alim integer := greatest(coalesce(attention_cap, 1000), 1);
    ongoing bigint;
    paused bigint;
    attention bigint;
BEGIN
    SELECT count(*) INTO ongoing
    FROM (SELECT 1 FROM pgbus.workflows w WHERE w.ended_at IS NULL LIMIT lim + 1) x;
    SELECT count(*) INTO paused
    FROM (SELECT 1 FROM pgbus.workflows w WHERE w.pause_cause IS NOT NULL AND w.ended_at IS NULL
          LIMIT lim + 1) x;
    SELECT count(*) INTO attention
    FROM (SELECT 1 FROM pgbus.workflow_stuck(stall_threshold, overdue_after, waiting_threshold)
          LIMIT alim + 1) x;
    RETURN jsonb_build_object(
        'ongoing', least(ongoing, lim), 'paused', least(paused, lim), 'attention', least(attention, alim),
        'capped', jsonb_build_object('ongoing', ongoing > lim, 'paused', paused > lim,
                                     'attention', attention > alim));
END;
$$;
