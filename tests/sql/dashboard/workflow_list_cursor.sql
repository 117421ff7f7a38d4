-- pgTAP tests for pgbus.workflow_list_cursor (sql/functions/401_workflow_list_cursor.sql): the
-- keyset cursor of the run list at a numbered page, with workflow_list's filters and order.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(10);

SELECT pgbus.workflow_register('t_lc_a', '[{"name": "one"}]', 'd1', 't_lc_a');
SELECT pgbus.workflow_register('t_lc_b', '[{"name": "one"}]', 'd1', 't_lc_b');
-- Seven runs: a1..a5 of t_lc_a and b1, b2 of t_lc_b, created a minute apart (a1 oldest), a3
-- cancelled; two more of t_lc_a at the very same time (the id breaks the tie).
CREATE TEMP TABLE t_ids (tag text, id uuid);
INSERT INTO t_ids SELECT 'a' || i, (pgbus.workflow_start('t_lc_a', NULL, NULL, actor => 't')).workflow_id FROM generate_series(1, 5) i;
INSERT INTO t_ids SELECT 'b' || i, (pgbus.workflow_start('t_lc_b', NULL, NULL, actor => 't')).workflow_id FROM generate_series(1, 2) i;
INSERT INTO t_ids SELECT 'tie' || i, (pgbus.workflow_start('t_lc_a', NULL, NULL, actor => 't')).workflow_id FROM generate_series(1, 2) i;
UPDATE pgbus.workflows w SET created_at = now() - ((10 - x.n) || ' minutes')::interval
FROM (SELECT id, row_number() OVER (ORDER BY tag) AS n FROM t_ids WHERE tag NOT LIKE 'tie%') x WHERE w.workflow_id = x.id;
UPDATE pgbus.workflows SET created_at = now() - interval '30 seconds' WHERE workflow_id IN (SELECT id FROM t_ids WHERE tag LIKE 'tie%');
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'a3'), 'cancel', 'ops');

-- For every skip, the cursor is the skip-th row of the list, and the list after it is the rest.
SELECT is(
    (SELECT count(*)::int FROM generate_series(1, 8) k
     WHERE (SELECT (c.before_created, c.before_id) FROM pgbus.workflow_list_cursor(k, 'all') c)
           IS NOT DISTINCT FROM (SELECT (l.created_at, l.workflow_id) FROM pgbus.workflow_list('all', page_size => 9) l OFFSET k - 1 LIMIT 1)),
    8, 'the cursor at skip k is the k-th row of the list (ties broken by id, as the list does)');
SELECT is(
    (SELECT array_agg(l.workflow_id) FROM pgbus.workflow_list_cursor(3, 'all') c,
            pgbus.workflow_list('all', before_created => c.before_created, before_id => c.before_id, page_size => 2) l),
    (SELECT array_agg(workflow_id) FROM (SELECT workflow_id FROM pgbus.workflow_list('all', page_size => 9) OFFSET 3 LIMIT 2) x),
    'the list from the cursor at skip 3 is rows 4 and 5');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list_cursor(0, 'all')), 0, 'skip 0: no cursor (the first page needs none)');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list_cursor(NULL, 'all')), 0, 'skip NULL: no cursor');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list_cursor(9, 'all')), 1, 'skip 9 of 9: the last row');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list_cursor(10, 'all')), 0, 'past the end: no cursor');
SELECT is((SELECT before_id FROM pgbus.workflow_list_cursor(2, only_class => 't_lc_b')),
          (SELECT id FROM t_ids WHERE tag = 'b1'), 'filters: class (b2 then b1, newest first)');
SELECT is((SELECT count(*)::int FROM pgbus.workflow_list_cursor(6)), 1,
          'ongoing by default: 8 ongoing runs reach skip 6 ...');
SELECT is((SELECT before_id FROM pgbus.workflow_list_cursor(1, 'cancelled')),
          (SELECT id FROM t_ids WHERE tag = 'a3'), '... and status cancelled has the one');
SELECT throws_ok($$SELECT * FROM pgbus.workflow_list_cursor(1, 'sleeping')$$, '22023', NULL,
                 'an unknown status raises 22023, as the list does');

SELECT * FROM finish();
ROLLBACK;
