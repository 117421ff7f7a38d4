-- pgTAP tests for the dashboard's workflow pages (sql/functions/300_workflow_pages.sql):
-- workflow_list (every filter, status, keyset paging), workflow_list_count (capped),
-- workflow_row_facts (sentence kinds), workflow_detail, workflow_attention (groups shared with
-- workflow_stuck), workflow_attention_act (bulk resume/cancel, forged groups), workflow_home_card.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(53);

SELECT pgbus.workflow_register('t_wp_a', '[{"name": "charge"}, {"name": "receipt"}]', 'd1', 't_wp_a');
SELECT pgbus.workflow_register('t_wp_b', '[{"name": "welcome", "wait": 3600}]', 'd1', 't_wp_b');

-- Five paused-on-error runs of t_wp_a (ValueError on charge), one manual pause, one cancelled.
CREATE TEMP TABLE t_ids (tag text, id uuid);
INSERT INTO t_ids SELECT 'err' || i, (pgbus.workflow_start('t_wp_a', 'Order', i::text, jsonb_build_object('n', i, 'api_token', 'x'), actor => 't')).workflow_id
FROM generate_series(1, 5) i;
CREATE TEMP TABLE t_read AS SELECT * FROM pgbus.read_jobs(ARRAY['t_wp_a'], 30, 10, 'host:1', 'rev7');
SELECT count(*) FROM (SELECT pgbus.workflow_end_step((context ->> 'step_id')::bigint, 'pause',
                             error => '{"class": "ValueError", "message": "card declined", "backtrace": ["app.py:1 in charge"], "causes": [{"class": "OSError", "message": "reset"}]}')
                      FROM t_read) x;
INSERT INTO t_ids SELECT 'manual', (pgbus.workflow_start('t_wp_a', 'Order', '99', actor => 't')).workflow_id;
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'manual'), 'pause', 'ops');
INSERT INTO t_ids SELECT 'gone', (pgbus.workflow_start('t_wp_a', 'Order', '100', actor => 't')).workflow_id;
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'gone'), 'cancel', 'ops', 'not needed');
-- A t_wp_b run scheduled an hour ahead, and one overdue by an hour.
INSERT INTO t_ids SELECT 'later', (pgbus.workflow_start('t_wp_b', NULL, NULL, actor => 't')).workflow_id;
INSERT INTO t_ids SELECT 'late', (pgbus.workflow_start('t_wp_b', NULL, NULL, actor => 't')).workflow_id;
UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '2 hours', created_at = now() - interval '3 hours'
WHERE workflow_id = (SELECT id FROM t_ids WHERE tag = 'late');
-- Distinct creation times so that the order is known: err1 oldest ... late newest.
UPDATE pgbus.workflows w SET created_at = now() - (x.n || ' minutes')::interval
FROM (SELECT id, row_number() OVER (ORDER BY tag DESC) + 2 AS n FROM t_ids) x WHERE w.workflow_id = x.id;
UPDATE pgbus.workflows w SET created_at = now() - interval '1 minute' WHERE workflow_id = (SELECT id FROM t_ids WHERE tag = 'late');
UPDATE pgbus.workflows w SET created_at = now() - interval '2 minutes' WHERE workflow_id = (SELECT id FROM t_ids WHERE tag = 'later');

-- list: status
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list(only_class => 't_wp_a')), 6, 'list: ongoing by default (the cancelled run is left out)');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('all', only_class => 't_wp_a')), 7, 'list: all');
SELECT is((SELECT array_agg(status) FROM pgbus.workflow_list('cancelled', only_class => 't_wp_a')), ARRAY['cancelled'], 'list: one status (cancelled)');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('paused', only_class => 't_wp_a')), 6, 'list: one status (paused)');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('ready', only_class => 't_wp_a')), 0, 'list: one status (ready)');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_list('sleeping')$$, '22023', NULL, 'list: an unknown status raises 22023');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_list(only_subject_type => 'Order')$$, '22023', NULL, 'list: a subject type without an id raises 22023');
-- list: filters
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list(only_class => 't_wp_b')), 2, 'list: class');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list(only_class => 't_wp_a', only_step => 'charge')), 6, 'list: current step');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list(only_step => 'nope')), 0, 'list: current step that none is on');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list(only_error_class => 'ValueError')), 5, 'list: error class');
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list('all', only_subject_type => 'Order', only_subject_id => '3')),
          ARRAY[(SELECT id FROM t_ids WHERE tag = 'err3')], 'list: subject type and id');
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list('all', only_run => (SELECT id FROM t_ids WHERE tag = 'gone'))),
          ARRAY[(SELECT id FROM t_ids WHERE tag = 'gone')], 'list: workflow id');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('all', created_from => now() - interval '2 minutes 30 seconds')), 2,
          'list: created from');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('all', only_class => 't_wp_b', created_to => now() - interval '1 minute 30 seconds')), 1,
          'list: created before');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('all', ended_from => now() - interval '1 hour', ended_to => now() + interval '1 hour')), 1,
          'list: ended-at range (only ended runs)');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('all', ended_from => now() + interval '1 hour')), 0, 'list: ended-at range outside');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list('paused', only_class => 't_wp_a', only_error_class => 'ValueError', only_subject_type => 'Order', only_subject_id => '2')), 1,
          'list: filters combine');
-- list: order and keyset paging
SELECT is((SELECT array_agg(workflow_id ORDER BY o) FROM (SELECT workflow_id, row_number() OVER () o FROM pgbus.workflow_list('all', page_size => 100)) x
           WHERE workflow_id IN (SELECT id FROM t_ids)),
          (SELECT array_agg(w.workflow_id ORDER BY w.created_at DESC, w.workflow_id DESC) FROM pgbus.workflows w WHERE w.workflow_id IN (SELECT id FROM t_ids)),
          'list: newest first');
CREATE TEMP TABLE t_p1 AS SELECT * FROM pgbus.workflow_list('all', only_class => 't_wp_a', page_size => 3);
CREATE TEMP TABLE t_p2 AS SELECT * FROM pgbus.workflow_list('all', only_class => 't_wp_a', page_size => 3,
    before_created => (SELECT created_at FROM t_p1 ORDER BY created_at LIMIT 1), before_id => (SELECT workflow_id FROM t_p1 ORDER BY created_at LIMIT 1));
CREATE TEMP TABLE t_p3 AS SELECT * FROM pgbus.workflow_list('all', only_class => 't_wp_a', page_size => 3,
    before_created => (SELECT created_at FROM t_p2 ORDER BY created_at LIMIT 1), before_id => (SELECT workflow_id FROM t_p2 ORDER BY created_at LIMIT 1));
SELECT is((SELECT count(*)::int FROM (SELECT workflow_id FROM t_p1 UNION SELECT workflow_id FROM t_p2 UNION SELECT workflow_id FROM t_p3) u), 7,
          'list: keyset pages cover every run once');
SELECT is((SELECT count(*)::int FROM t_p3), 1, 'list: the last page holds the rest');
-- count
SELECT is(pgbus.workflow_list_count('all', only_class => 't_wp_a'), '{"count": 7, "capped": false}', 'count: exact below the cap');
SELECT is(pgbus.workflow_list_count('all', only_class => 't_wp_a', cap => 3), '{"count": 3, "capped": true}', 'count: capped');
-- facts: the sentence kinds
SELECT is((SELECT facts ->> 'kind' || ' ' || (facts ->> 'error_class') || ' ' || (facts ->> 'step') FROM pgbus.workflow_list(only_run => (SELECT id FROM t_ids WHERE tag = 'err1'))),
          'paused_error ValueError charge', 'facts: paused on an error, with its class and step');
SELECT is((SELECT facts ->> 'kind' FROM pgbus.workflow_list(only_run => (SELECT id FROM t_ids WHERE tag = 'manual'))), 'paused_manual', 'facts: paused by hand');
SELECT is((SELECT facts ->> 'kind' FROM pgbus.workflow_list('all', only_run => (SELECT id FROM t_ids WHERE tag = 'gone'))), 'cancelled', 'facts: cancelled');
SELECT is((SELECT facts ->> 'kind' FROM pgbus.workflow_list(only_run => (SELECT id FROM t_ids WHERE tag = 'later'))), 'scheduled', 'facts: scheduled ahead');
SELECT ok((SELECT (facts ->> 'kind') = 'overdue' AND (facts ->> 'overdue_seconds')::float > 7000 FROM pgbus.workflow_list(only_run => (SELECT id FROM t_ids WHERE tag = 'late'))),
          'facts: overdue, by how long');
-- detail
SELECT is(pgbus.workflow_detail(gen_random_uuid()), NULL, 'detail: NULL for an unknown id');
CREATE TEMP TABLE t_d AS SELECT pgbus.workflow_detail((SELECT id FROM t_ids WHERE tag = 'err1')) AS d;
SELECT is((SELECT d -> 'actions' FROM t_d), '["resume", "resume_at", "signal", "cancel"]', 'detail: the actions workflow_available_actions allows');
SELECT is((SELECT d -> 'steps' FROM t_d), '["charge", "receipt"]', 'detail: the definition''s steps');
SELECT is((SELECT (d -> 'attempts' -> 0 ->> 'worker') || ' ' || (d -> 'attempts' -> 0 ->> 'app_revision') || ' ' || (d -> 'attempts' -> 0 -> 'causes' -> 0 ->> 'class') FROM t_d),
          'host:1 rev7 OSError', 'detail: an attempt with its worker, revision and cause chain');
SELECT ok((SELECT (d -> 'attempts' -> 0 ->> 'ran')::float >= 0 AND (d -> 'attempts' -> 0 ->> 'queued')::float >= 0 FROM t_d), 'detail: ran and queued durations');
SELECT is((SELECT d -> 'arguments' ->> 'n' FROM t_d), '1', 'detail: the arguments');
SELECT is((SELECT jsonb_array_length(d -> 'events') > 3 FROM t_d), true, 'detail: the audit trail');
SELECT is((SELECT jsonb_array_length(d -> 'pauses') FROM (SELECT pgbus.workflow_detail((SELECT id FROM t_ids WHERE tag = 'manual')) d) x), 1, 'detail: a pause segment');
-- attention: the same runs as workflow_stuck, grouped
SELECT is((SELECT sum(runs)::int FROM pgbus.workflow_attention()), (SELECT count(*)::int FROM pgbus.workflow_stuck()), 'attention: every stuck run, once');
SELECT is((SELECT (runs, newest_error)::text FROM pgbus.workflow_attention('t_wp_a') WHERE reason = 'paused_error'),
          '(5,"card declined")', 'attention: a group''s count and newest error');
SELECT is((SELECT array_agg(reason ORDER BY reason) FROM pgbus.workflow_attention('t_wp_a')), ARRAY['paused_error', 'paused_manual'], 'attention: one group per reason');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_attention('t_wp_b') WHERE reason = 'overdue'), 1, 'attention: overdue runs');
-- attention: exactly the groups of the query before the class filter moved into workflow_stuck
-- (grouping every stuck run, then keeping only_class's), with and without a class.
CREATE FUNCTION pg_temp.attention_before(only_class text DEFAULT NULL)
RETURNS TABLE (workflow_class text, step_name text, reason text, error_class text,
               runs bigint, first_seen timestamptz, last_seen timestamptz, newest_error text)
LANGUAGE sql STABLE AS $f$
    SELECT g.workflow_class, g.step_name, g.reason, g.error_class, g.runs, g.first_seen, g.last_seen,
           (SELECT s.error ->> 'message'
            FROM pgbus.workflows w JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id
            WHERE w.workflow_id = g.newest_failed)
    FROM (SELECT x.workflow_class, x.step_name, x.reason, x.error_class, count(*) AS runs,
                 min(x.since) AS first_seen, max(x.since) AS last_seen,
                 (array_agg(x.workflow_id ORDER BY x.since DESC NULLS LAST)
                      FILTER (WHERE x.error_class IS NOT NULL))[1] AS newest_failed
          FROM pgbus.workflow_stuck() x
          WHERE only_class IS NULL OR x.workflow_class = only_class
          GROUP BY 1, 2, 3, 4) g
    ORDER BY g.runs DESC, 1, 2, 3, 4
$f$;
SELECT results_eq($$SELECT * FROM pgbus.workflow_attention()$$, $$SELECT * FROM pg_temp.attention_before()$$,
                  'attention: the same groups, in the same order, as before');
SELECT results_eq(
    $$SELECT c.cls, a.* FROM unnest(ARRAY['t_wp_a', 't_wp_b', 't_wp_nobody']) c(cls), LATERAL pgbus.workflow_attention(c.cls) a$$,
    $$SELECT c.cls, a.* FROM unnest(ARRAY['t_wp_a', 't_wp_b', 't_wp_nobody']) c(cls), LATERAL pg_temp.attention_before(c.cls) a$$,
    'attention(only_class): the same groups as before for each class');
-- attention over every class keeps its plan for the session (a static query): after enough calls
-- for a generic plan, a call with other thresholds still gets its own answer.
SELECT is(
    (SELECT array_agg(a.n ORDER BY i) FROM generate_series(1, 8) i,
            LATERAL (SELECT coalesce(sum(g.runs), 0)::int AS n
                     FROM pgbus.workflow_attention(NULL, interval '15 minutes',
                                                   CASE WHEN i < 8 THEN interval '5 minutes' ELSE interval '100 years' END,
                                                   interval '7 days') g) a),
    (SELECT array_agg(k.n ORDER BY i) FROM generate_series(1, 8) i,
            LATERAL (SELECT count(*)::int AS n
                     FROM pgbus.workflow_stuck(interval '15 minutes',
                                               CASE WHEN i < 8 THEN interval '5 minutes' ELSE interval '100 years' END,
                                               interval '7 days') x) k),
    'attention over every class: its kept plan follows each call''s thresholds');
SELECT isnt((SELECT coalesce(sum(runs), 0)::int FROM pgbus.workflow_attention(NULL, interval '15 minutes', interval '100 years', interval '7 days')),
            (SELECT coalesce(sum(runs), 0)::int FROM pgbus.workflow_attention()),
            'attention over every class: the thresholds change its answer here (an overdue run)');
-- bulk: forged groups change nothing
SELECT is(pgbus.workflow_attention_act('resume', 't_wp_a', 'charge', 'bored', 'ValueError', 'dashboard:t') ->> 'code', 'invalid', 'bulk: an unknown reason is refused');
SELECT is(pgbus.workflow_attention_act('resume', ' ', 'charge', 'paused_error', 'ValueError', 'dashboard:t') ->> 'code', 'invalid', 'bulk: a blank class is refused');
SELECT is(pgbus.workflow_attention_act('pause', 't_wp_a', 'charge', 'paused_error', 'ValueError', 'dashboard:t') ->> 'code', 'invalid', 'bulk: only resume and cancel');
-- bulk: the cap, then the rest; one run that moved on meanwhile is counted so
SELECT is(pgbus.workflow_attention_act('resume', 't_wp_a', 'charge', 'paused_error', 'ValueError', 'dashboard:t', 'fixed', max_runs => 2) - 'message',
          '{"ok": true, "done": 2, "failed": 0, "moved_on": 0, "more_may_wait": true}', 'bulk: at most max_runs, more may wait');
SELECT is(pgbus.workflow_attention_act('cancel', 't_wp_a', 'charge', 'paused_error', 'ValueError', 'dashboard:t') ->> 'message',
          'Cancelled 3', 'bulk: cancel the rest of the group');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_events WHERE actor = 'dashboard:t' AND event = 'resumed' AND reason = 'fixed'), 2, 'bulk: each run audited with actor and reason');
-- home card
SELECT is(pgbus.workflow_home_card() - 'attention' - 'capped', jsonb_build_object('ongoing', (SELECT count(*) FROM pgbus.workflows WHERE ended_at IS NULL),
                                                                       'paused', (SELECT count(*) FROM pgbus.workflows WHERE status = 'paused')),
          'home card: ongoing and paused');
SELECT is(pgbus.workflow_home_card() -> 'capped', '{"ongoing": false, "paused": false, "attention": false}', 'home card: nothing capped');
SELECT is(pgbus.workflow_home_card(cap => 1, attention_cap => 1),
          jsonb_build_object('ongoing', 1, 'paused', 1, 'attention', 1,
                             'capped', jsonb_build_object('ongoing', true, 'paused', false, 'attention', true)),
          'home card: each count stops at its cap and says so (one run is paused: not capped)');

SELECT * FROM finish();
ROLLBACK;
