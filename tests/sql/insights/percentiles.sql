-- pgTAP tests for the insights' exact percentiles over sorted lists (sql/functions/500:
-- pgbus.insights_sorted_percentiles, pgbus.insights_kth, pgbus.insights_percentiles,
-- pgbus.insights_merge): the same answers as percentile_cont, bit for bit, on hand-checked
-- cases and on 200 generated ones (one list, one long list beside a few values, many short
-- lists, ties, empty lists).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(17);

-- Lists from their text forms ('{3, 1}'), each sorted.
CREATE FUNCTION pg_temp.lists(VARIADIC l text[]) RETURNS pgbus.insights_values[] LANGUAGE sql AS $f$
    SELECT array_agg(ROW(array(SELECT x FROM unnest(u.e::double precision[]) x ORDER BY x))::pgbus.insights_values ORDER BY u.i)
    FROM unnest(l) WITH ORDINALITY AS u(e, i)
$f$;

-- 1, 2, 3, 10: p50 2.5, p95 3 + 0.85 * 7 = 8.95 (8.949999999999998 in double precision, as percentile_cont), p99 9.79.
SELECT is(pgbus.insights_sorted_percentiles('{1, 2, 3, 10}', '{0.5, 0.95, 0.99}'),
          (SELECT percentile_cont('{0.5, 0.95, 0.99}'::double precision[]) WITHIN GROUP (ORDER BY x) FROM unnest('{10, 3, 1, 2}'::double precision[]) x),
          'one sorted list: by position, as percentile_cont');
SELECT is(pgbus.insights_sorted_percentiles('{1, 2, 3, 10}', '{0.5}'), '{2.5}', 'the median of 1, 2, 3, 10 is 2.5');
SELECT is(pgbus.insights_sorted_percentiles('{}', '{0.5}'), NULL, 'no values: NULL');
-- The k-th smallest of two sorted arrays together: 1, 2, 3, 5, 8, 9 from {1, 5, 9} and {2, 3, 8}.
SELECT is(array(SELECT pgbus.insights_kth('{1, 5, 9}', '{2, 3, 8}', k) FROM generate_series(1, 6) k),
          '{1, 2, 3, 5, 8, 9}', 'the k-th of two sorted arrays, for every k');
SELECT is(array(SELECT pgbus.insights_kth('{}', '{2, 3, 8}', k) FROM generate_series(1, 3) k) ||
          array(SELECT pgbus.insights_kth('{2, 3, 8}', '{}', k) FROM generate_series(1, 3) k),
          '{2, 3, 8, 2, 3, 8}', 'one of them empty: the other by position');
SELECT is(array(SELECT pgbus.insights_kth('{1, 2, 3}', '{7, 8}', k) FROM generate_series(1, 5) k),
          '{1, 2, 3, 7, 8}', 'all of one before all of the other');
SELECT is(array(SELECT pgbus.insights_kth('{4, 4, 4}', '{1, 4, 9}', k) FROM generate_series(1, 6) k),
          '{1, 4, 4, 4, 4, 9}', 'ties across both');
-- One long list and a few other values:
-- 1..3000 beside 5.5, 200.5 and 10000.
SELECT is(pgbus.insights_percentiles(ARRAY[ROW(array(SELECT g::double precision FROM generate_series(1, 3000) g))::pgbus.insights_values,
                                           ROW('{5.5, 200.5, 10000}')::pgbus.insights_values], '{0.5, 0.95, 0.99, 0, 1}'),
          (SELECT percentile_cont('{0.5, 0.95, 0.99, 0, 1}'::double precision[]) WITHIN GROUP (ORDER BY x)
           FROM (SELECT g::double precision FROM generate_series(1, 3000) g UNION ALL SELECT unnest('{5.5, 200.5, 10000}'::double precision[])) v(x)),
          'a long list beside a few values: as percentile_cont');
SELECT is((pgbus.insights_percentiles(ARRAY[ROW(array(SELECT g::double precision FROM generate_series(1, 3000) g))::pgbus.insights_values,
                                            ROW('{5.5, 200.5, 10000}')::pgbus.insights_values], '{0.5}'))[1], 1500::double precision,
          'its median: the 1502nd of 3003 values, 1500 (5.5 and 200.5 come before)');
SELECT is(pgbus.insights_percentiles(ARRAY[ROW(array(SELECT 5::double precision FROM generate_series(1, 3000)))::pgbus.insights_values,
                                           ROW('{1, 5, 9}')::pgbus.insights_values], '{0.001, 0.5, 0.99}'),
          '{5, 5, 5}', 'ties: 1, 5 x 3001, 9');
SELECT is(pgbus.insights_percentiles(pg_temp.lists('{10, 3, 1}', '{2}'), '{0.5, 0.95, 0.99}'),
          pgbus.insights_sorted_percentiles('{1, 2, 3, 10}', '{0.5, 0.95, 0.99}'), 'two lists: the percentiles of their values together');
SELECT is(pgbus.insights_percentiles(pg_temp.lists('{}', '{}'), '{0.5}'), NULL, 'empty lists: NULL');
SELECT is(pgbus.insights_percentiles('{}', '{0.5}'), NULL, 'no lists: NULL');
SELECT is(pgbus.insights_merge(pg_temp.lists('{3, 7}', '{1, 9, 10}')), '{1, 3, 7, 9, 10}', 'merged into one sorted array');

-- Generated cases: n values in m lists, either spread evenly or one list holding about 97 %
-- (a window's span beside its other hours), with many ties in every third case.
SELECT setseed(0.549);
CREATE TEMP TABLE cases AS
SELECT c, 1 + (c * 7) % 6 AS m, (ARRAY[1, 7, 60, 400, 2500, 12000])[1 + c % 6] AS n, c % 3 = 0 AS ties, c % 4 <> 0 AS one_long
FROM generate_series(1, 200) c;
CREATE TEMP TABLE vals AS
SELECT k.c, CASE WHEN NOT k.one_long THEN floor(random() * k.m)::int WHEN random() < 0.97 THEN 0 ELSE 1 + floor(random() * (k.m - 1))::int END AS li,
       CASE WHEN k.ties THEN round(random() * 20)::double precision ELSE random() * 100 END AS x
FROM cases k, generate_series(1, k.n);
CREATE TEMP TABLE lists AS SELECT c, li, array_agg(x ORDER BY x) AS v FROM vals GROUP BY c, li
UNION ALL SELECT c, -1, '{}' FROM cases WHERE c % 5 = 0;
CREATE TEMP TABLE want AS
SELECT c, percentile_cont('{0.5, 0.95, 0.99, 0, 1, 0.3333, 0.001}'::double precision[]) WITHIN GROUP (ORDER BY x) AS p FROM vals GROUP BY c;
SELECT is((SELECT count(*) FROM (SELECT l.c, pgbus.insights_percentiles(array_agg(ROW(l.v)::pgbus.insights_values ORDER BY l.li),
                                                                        '{0.5, 0.95, 0.99, 0, 1, 0.3333, 0.001}') AS p
                                 FROM lists l GROUP BY l.c) got JOIN want USING (c) WHERE got.p IS NOT DISTINCT FROM want.p),
          200::bigint, '200 generated cases: the same percentiles as percentile_cont, bit for bit');
SELECT ok((SELECT count(*) FROM cases WHERE one_long AND n >= 2500 AND m >= 2) >= 30, 'of which at least 30 are one long list beside others, n >= 2500');
SELECT is((SELECT count(*) FROM (SELECT c, pgbus.insights_merge(array_agg(ROW(v)::pgbus.insights_values)) AS v FROM lists GROUP BY c) got
           WHERE got.v = (SELECT array_agg(x ORDER BY x) FROM vals WHERE vals.c = got.c)), 200::bigint, 'merged: every value once, sorted');

SELECT * FROM finish();
ROLLBACK;
