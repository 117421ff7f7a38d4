-- pgTAP tests for sql/functions/085_workflow_helpers.sql: idempotency keys (start and signal
-- keys of only whitespace are no key).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);

CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wfh_' || $1 $f$;
\ir ../include/workflow_helpers.psql
CREATE FUNCTION pg_temp.start(name text, steps text, key text DEFAULT NULL) RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name), idempotency_key => key);
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;

-------------------------------------------------------------------------------------------------
-- pgbus.idempotency_key
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.idempotency_key(NULL), NULL, 'idempotency_key: NULL is no key');
SELECT is(pgbus.idempotency_key(''), NULL, 'idempotency_key: an empty key is no key');
SELECT is(pgbus.idempotency_key(E' \t\n\r\f' || chr(11)), NULL, 'idempotency_key: tabs, newlines and spaces are no key');
SELECT is(pgbus.idempotency_key(E'\t order 7 \n'), 'order 7', 'idempotency_key: whitespace at either end goes, inner stays');

-------------------------------------------------------------------------------------------------
-- start keys
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('tab1', '[{"name": "a"}]', E'\t'); END $d$;
DO $d$ BEGIN PERFORM pg_temp.start('tab2', '[{"name": "a"}]', E'\n\t '); END $d$;
SELECT isnt(pg_temp.run('tab1'), pg_temp.run('tab2'), 'workflow_start: a key of tabs and newlines is no key (two runs)');
SELECT results_eq($$SELECT dup, (pg_temp.w(name)).idempotency_key FROM t_runs WHERE name IN ('tab1', 'tab2') ORDER BY name$$,
                  $$VALUES (false, NULL::text), (false, NULL::text)$$,
                  'workflow_start: ... not stored and not a duplicate');
DO $d$ BEGIN PERFORM pg_temp.start('k', '[{"name": "a"}]', E'\tk1\n'); END $d$;
SELECT is((SELECT s.workflow_id FROM pgbus.workflow_start(pg_temp.cls('k'), idempotency_key => 'k1') s),
          pg_temp.run('k'), 'workflow_start: a key is the same key without its surrounding whitespace');

-------------------------------------------------------------------------------------------------
-- signal keys
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.workflow_command(pg_temp.run('tab1'), 'signal', params => jsonb_build_object('name', 'go', 'idempotency_key', E'\t')) -> 'duplicate_delivery',
          'false'::jsonb, 'signal: a key of tabs is no key (stored)');
SELECT is(pgbus.workflow_command(pg_temp.run('tab1'), 'signal', params => jsonb_build_object('name', 'go', 'idempotency_key', E'\n \t')) -> 'duplicate_delivery',
          'false'::jsonb, 'signal: ... and does not dedup a later key of newlines');
SELECT is(pgbus.workflow_command(pg_temp.run('tab1'), 'signal', params => jsonb_build_object('name', 'go', 'idempotency_key', ' ')) -> 'duplicate_delivery',
          'false'::jsonb, 'signal: ... nor a blank one');
SELECT is((SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = pg_temp.run('tab1') AND idempotency_key IS NULL),
          3::bigint, 'signal: the three are stored without a key');
SELECT is(pgbus.workflow_command(pg_temp.run('tab1'), 'signal', params => jsonb_build_object('name', 'go', 'idempotency_key', E'\tsame')) -> 'duplicate_delivery',
          'false'::jsonb, 'signal: a real key is stored');
SELECT is(pgbus.workflow_command(pg_temp.run('tab1'), 'signal', params => jsonb_build_object('name', 'go', 'idempotency_key', E'same\n')) -> 'duplicate_delivery',
          'true'::jsonb, 'signal: ... and the same key with other surrounding whitespace is a duplicate');

SELECT * FROM finish();
ROLLBACK;
