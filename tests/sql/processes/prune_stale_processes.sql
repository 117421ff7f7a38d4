-- pgTAP tests for sql/functions/040_processes.sql and sql/functions/050_maintenance.sql: prune_stale_processes.
-- (Split from processes_and_maintenance.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);
\ir ../include/processes_and_maintenance_setup.psql
-------------------------------------------------------------------------------------------------
-- prune_stale_processes
-------------------------------------------------------------------------------------------------
DELETE FROM pgbus.processes;
INSERT INTO t_p VALUES
    ('silent_1h', pgbus.process_register('worker', 'h', 1)),
    ('silent_10m', pgbus.process_register('worker', 'h', 2)),
    ('silent_4m', pgbus.process_register('worker', 'h', 3)),
    ('fresh', pgbus.process_register('supervisor', 'h', 4));
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '1 hour' WHERE id = pg_temp.p('silent_1h');
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = pg_temp.p('silent_10m');
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '4 minutes' WHERE id = pg_temp.p('silent_4m');
SELECT is(pgbus.prune_stale_processes(), 2, 'prune_stale_processes: by default removes processes silent for over 5 minutes');
SELECT results_eq(
    $$SELECT pid FROM pgbus.processes ORDER BY pid$$,
    $$VALUES (3), (4)$$,
    'prune_stale_processes: the recent processes stay');
SELECT is(pgbus.prune_stale_processes(), 0, 'prune_stale_processes: nothing more to prune');
SELECT is(pgbus.prune_stale_processes(interval '1 minute'), 1, 'prune_stale_processes: silent_for sets the threshold');
SELECT results_eq($$SELECT pid FROM pgbus.processes$$, $$VALUES (4)$$, 'prune_stale_processes: the fresh process stays');
SELECT is(pgbus.process_heartbeat(pg_temp.p('silent_4m')), false, 'process_heartbeat: false for a pruned process');
SELECT is(pgbus.prune_stale_processes(interval '0'), 0, 'prune_stale_processes: a heartbeat of now is not older than now');

SELECT * FROM finish();
ROLLBACK;
