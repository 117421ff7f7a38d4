BEGIN;
SELECT plan(4);

SELECT has_function('pgbus', 'pgmq_info', 'pgbus.pgmq_info() exists');
SELECT results_eq(
    'SELECT * FROM pgbus.pgmq_info()',
    $$VALUES ('sql'::text, '1.13.0'::text)$$,
    'a SQL install made by pgbus reports its version'
);

DELETE FROM pgbus.meta WHERE key = 'pgmq_sql_version';
SELECT results_eq(
    'SELECT * FROM pgbus.pgmq_info()',
    $$VALUES ('sql'::text, NULL::text)$$,
    'a SQL install made by someone else has no known version'
);

ALTER SCHEMA pgmq RENAME TO pgmq_elsewhere;
SELECT is((SELECT installed_as FROM pgbus.pgmq_info()), 'missing', 'no pgmq schema: missing');

SELECT * FROM finish();
ROLLBACK;
