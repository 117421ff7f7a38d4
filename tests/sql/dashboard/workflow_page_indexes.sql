-- pgTAP tests for the run list's indexes of migration 0020 (sql/schema/0020_workflow_page_indexes.sql):
-- paused runs newest first and ongoing runs by error class newest first. The list's own
-- queries (pgbus.workflow_list_where's WHERE clause and order) can read a page and a count
-- from them alone, they give the same answers as the plain conditions, and they name no column
-- a step changes (so the step hot path's run updates stay HOT).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(14);

SELECT has_index('pgbus', 'workflows', 'workflows_paused_recent_idx', 'the paused runs'' index exists');
SELECT has_index('pgbus', 'workflows', 'workflows_error_class_ongoing_idx', 'the ongoing runs'' error-class index exists');
SELECT is((SELECT count(*)::int FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE c.relname IN ('workflows_paused_recent_idx', 'workflows_error_class_ongoing_idx')
             AND pg_get_indexdef(i.indexrelid) ~ '\m(status|updated_at|current_step|current_step_id)\M'),
          0, 'neither names a column a step changes (status, updated_at, the current step)');

-- Runs of t_wpi_a: three paused on an error (ValueError at charge), one paused by hand, one
-- failed then cancelled (it keeps its error class), two healthy and ongoing. Distinct creation
-- times, in the order started.
SELECT pgbus.workflow_register('t_wpi_a', '[{"name": "charge"}, {"name": "receipt"}]', 'd1', 't_wpi_a');
CREATE TEMP TABLE t_ids (tag text, id uuid);
INSERT INTO t_ids SELECT 'err' || i, (pgbus.workflow_start('t_wpi_a', actor => 't')).workflow_id FROM generate_series(1, 4) i;
CREATE TEMP TABLE t_read AS SELECT * FROM pgbus.read_jobs(ARRAY['t_wpi_a'], 30, 10, 'host:1', 'rev7');
SELECT is((SELECT count(*)::int FROM t_read WHERE context IS NOT NULL), 4, 'setup: four attempts begin');
SELECT is((SELECT count(*)::int FROM (SELECT pgbus.workflow_end_step((context ->> 'step_id')::bigint, 'pause',
                                             error => '{"class": "ValueError", "message": "card declined"}') ->> 'status' AS s
                                      FROM t_read) x WHERE s = 'paused'),
          4, 'setup: the four pause on an error');
SELECT is(pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'err4'), 'cancel', 'ops') ->> 'ok', 'true',
          'setup: one of them is cancelled (and keeps its error class)');
INSERT INTO t_ids SELECT 'manual', (pgbus.workflow_start('t_wpi_a', actor => 't')).workflow_id;
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'manual'), 'pause', 'ops');
INSERT INTO t_ids SELECT 'ok' || i, (pgbus.workflow_start('t_wpi_a', actor => 't')).workflow_id FROM generate_series(1, 2) i;
UPDATE pgbus.workflows w SET created_at = now() - (x.n || ' minutes')::interval
FROM (SELECT id, row_number() OVER (ORDER BY tag DESC) AS n FROM t_ids) x WHERE w.workflow_id = x.id;
ANALYZE pgbus.workflows;

-- The list's query for a filter, as pgbus.workflow_list builds it: its plan, with the other
-- ways to read the runs (a scan of the whole table, a bitmap, a sort) made unattractive.
CREATE FUNCTION pg_temp.plan_of(only_status text, only_error_class text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    line text;
    plan text := '';
BEGIN
    SET LOCAL enable_seqscan = off;
    SET LOCAL enable_bitmapscan = off;
    SET LOCAL enable_sort = off;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) SELECT w.workflow_id FROM pgbus.workflows w'
        || pgbus.workflow_list_where(only_status, NULL, NULL, only_error_class, NULL, NULL, NULL, NULL, NULL,
                                     NULL, NULL, NULL, NULL)
        || ' ORDER BY w.created_at DESC, w.workflow_id DESC LIMIT 26'
        USING only_status, NULL::text, NULL::text, only_error_class LOOP
        plan := plan || line || E'\n';
    END LOOP;
    RESET enable_seqscan;
    RESET enable_bitmapscan;
    RESET enable_sort;
    RETURN plan;
END;
$f$;
SELECT matches(pg_temp.plan_of('paused', NULL), 'Index Only Scan using workflows_paused_recent_idx',
               'status=paused: a page newest first straight from workflows_paused_recent_idx');
SELECT matches(pg_temp.plan_of('ongoing', 'ValueError'), 'Index Only Scan using workflows_error_class_ongoing_idx',
               'error_class with the default status: a page newest first straight from workflows_error_class_ongoing_idx');
SELECT matches(pg_temp.plan_of('paused', 'ValueError'), 'Index (Only )?Scan using workflows_(paused_recent|error_class_ongoing)_idx',
               'status=paused with an error class: from one of them');

-- The same answers as the plain conditions.
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list('paused', only_class => 't_wpi_a')),
          (SELECT array_agg(workflow_id ORDER BY created_at DESC, workflow_id DESC) FROM pgbus.workflows
           WHERE workflow_class = 't_wpi_a' AND status = 'paused'),
          'status=paused: every paused run, newest first');
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list(only_error_class => 'ValueError')),
          (SELECT array_agg(id ORDER BY tag DESC) FROM t_ids WHERE tag IN ('err1', 'err2', 'err3')),
          'error class: the ongoing runs whose current attempt failed with it, newest first (not the cancelled one)');
SELECT is((SELECT array_agg(workflow_id) FROM pgbus.workflow_list('all', only_error_class => 'ValueError')),
          (SELECT array_agg(id ORDER BY tag DESC) FROM t_ids WHERE tag LIKE 'err%'),
          'error class with status=all: the cancelled run too');
SELECT is(pgbus.workflow_list_count('paused'), jsonb_build_object('count', (SELECT count(*) FROM pgbus.workflows WHERE status = 'paused'), 'capped', false),
          'status=paused: the count');
SELECT is(pgbus.workflow_list_count(only_error_class => 'ValueError'), '{"count": 3, "capped": false}',
          'error class: the count (ongoing runs only)');

SELECT * FROM finish();
ROLLBACK;
