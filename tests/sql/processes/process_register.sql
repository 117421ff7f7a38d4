-- pgTAP tests for sql/functions/040_processes.sql and sql/functions/050_maintenance.sql: process_register; process_heartbeat; process_deregister.
-- (Split from processes_and_maintenance.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(25);
\ir ../include/processes_and_maintenance_setup.psql
-------------------------------------------------------------------------------------------------
-- process_register
-------------------------------------------------------------------------------------------------
INSERT INTO t_p VALUES ('worker', pgbus.process_register('worker', 'host-a', 4242, 'rev-1', '{"queues": ["default"], "threads": 5}'));
SELECT isnt(pg_temp.p('worker'), NULL, 'process_register: returns the new process id');
SELECT results_eq(
    $$SELECT kind, hostname, pid, app_revision, metadata, started_at, last_heartbeat_at
      FROM pgbus.processes WHERE id = pg_temp.p('worker')$$,
    $$VALUES ('worker'::text, 'host-a'::text, 4242, 'rev-1'::text, '{"queues": ["default"], "threads": 5}'::jsonb, now(), now())$$,
    'process_register: stores kind, hostname, pid, revision, metadata; started and heartbeat now');
INSERT INTO t_p VALUES ('supervisor', pgbus.process_register('supervisor', 'host-a', 4241));
SELECT results_eq(
    $$SELECT app_revision, metadata FROM pgbus.processes WHERE id = pg_temp.p('supervisor')$$,
    $$VALUES (NULL::text, '{}'::jsonb)$$,
    'process_register: revision and metadata default to NULL and {}');
INSERT INTO t_p VALUES ('dispatcher', pgbus.process_register('dispatcher', 'host-b', 99, NULL, NULL));
SELECT is((SELECT metadata FROM pgbus.processes WHERE id = pg_temp.p('dispatcher')), '{}'::jsonb,
          'process_register: NULL metadata is stored as {}');
SELECT is((SELECT count(DISTINCT id) FROM t_p), 3::bigint, 'process_register: every process gets its own id');
SELECT throws_ok($$SELECT pgbus.process_register('janitor', 'host-a', 1)$$, '23514', NULL,
                 'process_register: refuses an unknown kind');
SELECT throws_ok($$SELECT pgbus.process_register(NULL, 'host-a', 1)$$, '23502', NULL, 'process_register: refuses a NULL kind');
SELECT throws_ok($$SELECT pgbus.process_register('worker', NULL, 1)$$, '23502', NULL, 'process_register: refuses a NULL hostname');
SELECT throws_ok($$SELECT pgbus.process_register('worker', 'host-a', NULL)$$, '23502', NULL, 'process_register: refuses a NULL pid');
SELECT is((SELECT count(*) FROM pgbus.processes), 3::bigint, 'process_register: refused calls registered nothing');

-------------------------------------------------------------------------------------------------
-- process_heartbeat
-------------------------------------------------------------------------------------------------
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '3 minutes';
SELECT is(pgbus.process_heartbeat(pg_temp.p('worker')), true, 'process_heartbeat: true for a registered process');
SELECT is((SELECT last_heartbeat_at FROM pgbus.processes WHERE id = pg_temp.p('worker')), now(),
          'process_heartbeat: last_heartbeat_at is now');
SELECT is((SELECT metadata FROM pgbus.processes WHERE id = pg_temp.p('worker')), '{"queues": ["default"], "threads": 5}'::jsonb,
          'process_heartbeat: without metadata it keeps the metadata');
SELECT is((SELECT last_heartbeat_at FROM pgbus.processes WHERE id = pg_temp.p('supervisor')), now() - interval '3 minutes',
          'process_heartbeat: other processes are not touched');
SELECT is(pgbus.process_heartbeat(pg_temp.p('worker'), '{"busy": 2}'), true, 'process_heartbeat: with metadata');
SELECT is((SELECT metadata FROM pgbus.processes WHERE id = pg_temp.p('worker')), '{"busy": 2}'::jsonb,
          'process_heartbeat: new metadata replaces the old');
SELECT is((SELECT started_at FROM pgbus.processes WHERE id = pg_temp.p('worker')), now(),
          'process_heartbeat: started_at unchanged');
SELECT is(pgbus.process_heartbeat(-1), false, 'process_heartbeat: false for an unknown process');
SELECT is(pgbus.process_heartbeat(NULL), false, 'process_heartbeat: false for NULL');

-------------------------------------------------------------------------------------------------
-- process_deregister
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.process_deregister(pg_temp.p('dispatcher')), true, 'process_deregister: true for a registered process');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgbus.processes WHERE id = pg_temp.p('dispatcher')), 'process_deregister: the row is gone');
SELECT is((SELECT count(*) FROM pgbus.processes), 2::bigint, 'process_deregister: other processes stay');
SELECT is(pgbus.process_deregister(pg_temp.p('dispatcher')), false, 'process_deregister: false the second time');
SELECT is(pgbus.process_heartbeat(pg_temp.p('dispatcher')), false,
          'process_heartbeat: false once deregistered (the process should register again)');
SELECT is(pgbus.process_deregister(-1), false, 'process_deregister: false for an unknown process');

SELECT * FROM finish();
ROLLBACK;
