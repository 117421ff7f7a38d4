-- pgTAP tests for sql/functions/040_processes.sql and 050_maintenance.sql:
-- pgbus.process_register, process_heartbeat, process_deregister,
-- pgbus.cleanup_batches, prune_stale_processes, cleanup_job_stats.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(56);

-- Start from empty tables so the cleanup counts are exact (undone by the ROLLBACK).
DELETE FROM pgbus.processes;
DELETE FROM pgbus.batches;
DELETE FROM pgbus.job_stats;

CREATE TEMP TABLE t_p (name text PRIMARY KEY, id bigint);
CREATE TEMP TABLE t_b (name text PRIMARY KEY, id uuid);
CREATE FUNCTION pg_temp.p(name text) RETURNS bigint LANGUAGE sql AS $f$ SELECT id FROM t_p WHERE t_p.name = $1 $f$;
CREATE FUNCTION pg_temp.b(name text) RETURNS uuid LANGUAGE sql AS $f$ SELECT id FROM t_b WHERE t_b.name = $1 $f$;

-------------------------------------------------------------------------------------------------
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'process_register', ARRAY['text', 'text', 'integer', 'text', 'jsonb'],
                    'pgbus.process_register(text, text, integer, text, jsonb) exists');
SELECT has_function('pgbus', 'process_heartbeat', ARRAY['bigint', 'jsonb'], 'pgbus.process_heartbeat(bigint, jsonb) exists');
SELECT has_function('pgbus', 'process_deregister', ARRAY['bigint'], 'pgbus.process_deregister(bigint) exists');
SELECT has_function('pgbus', 'cleanup_batches', ARRAY['interval'], 'pgbus.cleanup_batches(interval) exists');
SELECT has_function('pgbus', 'prune_stale_processes', ARRAY['interval'], 'pgbus.prune_stale_processes(interval) exists');
SELECT has_function('pgbus', 'cleanup_job_stats', ARRAY['interval'], 'pgbus.cleanup_job_stats(interval) exists');

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

-------------------------------------------------------------------------------------------------
-- cleanup_batches: only finished batches, finished long enough ago.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES
    ('finished_30d', pgbus.batch_open('a')), ('finished_8d', pgbus.batch_open('b')),
    ('finished_6d', pgbus.batch_open('c')), ('finished_now', pgbus.batch_open('d')),
    ('open_old', pgbus.batch_open('e')), ('processing_old', pgbus.batch_open('f'));
SELECT is((SELECT count(*) FROM t_b WHERE name LIKE 'finished%' AND pgbus.batch_close(id)), 4::bigint,
          'cleanup_batches setup: four empty batches finished');
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_maint_work', 'Work', ARRAY['{}']::jsonb[], NULL, pg_temp.b('processing_old'))), 1::bigint,
          'cleanup_batches setup: a member in the processing batch');
SELECT is(pgbus.batch_close(pg_temp.b('processing_old')), false, 'cleanup_batches setup: the batch is processing');
UPDATE pgbus.batches SET finished_at = now() - interval '30 days' WHERE batch_id = pg_temp.b('finished_30d');
UPDATE pgbus.batches SET finished_at = now() - interval '8 days' WHERE batch_id = pg_temp.b('finished_8d');
UPDATE pgbus.batches SET finished_at = now() - interval '6 days' WHERE batch_id = pg_temp.b('finished_6d');
UPDATE pgbus.batches SET created_at = now() - interval '90 days' WHERE batch_id IN (pg_temp.b('open_old'), pg_temp.b('processing_old'));
SELECT is(pgbus.cleanup_batches(), 2, 'cleanup_batches: by default removes batches finished over 7 days ago');
SELECT results_eq(
    $$SELECT description FROM pgbus.batches ORDER BY description$$,
    $$VALUES ('c'::text), ('d'), ('e'), ('f')$$,
    'cleanup_batches: recent finished batches and unfinished batches stay');
SELECT is(pgbus.cleanup_batches(), 0, 'cleanup_batches: nothing more to remove');
SELECT is(pgbus.cleanup_batches(interval '1 day'), 1, 'cleanup_batches: older_than sets the threshold');
SELECT results_eq(
    $$SELECT description, status FROM pgbus.batches ORDER BY description$$,
    $$VALUES ('d'::text, 'finished'::text), ('e', 'open'), ('f', 'processing')$$,
    'cleanup_batches: the batch finished just now and the unfinished ones stay');
SELECT is(pgbus.cleanup_batches(interval '0'), 0, 'cleanup_batches: a batch finished now is not older than now');
SELECT is(pgbus.cleanup_batches(interval '1000 years'), 0, 'cleanup_batches: nothing is that old');
SELECT is((SELECT count(*) FROM pgbus.batches WHERE status <> 'finished'), 2::bigint,
          'cleanup_batches: open and processing batches are never removed, however old');

-------------------------------------------------------------------------------------------------
-- cleanup_job_stats
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$
    SELECT pgbus.record_job_stat('t_maint_stats', jsonb_build_object('job_class', c), 'success', 1, NULL, 0)
    FROM unnest(ARRAY['old_90d', 'old_31d', 'old_29d', 'old_2d', 'new']) c$$,
    'cleanup_job_stats setup: five stats');
UPDATE pgbus.job_stats SET created_at = now() - interval '90 days' WHERE job_class = 'old_90d';
UPDATE pgbus.job_stats SET created_at = now() - interval '31 days' WHERE job_class = 'old_31d';
UPDATE pgbus.job_stats SET created_at = now() - interval '29 days' WHERE job_class = 'old_29d';
UPDATE pgbus.job_stats SET created_at = now() - interval '2 days' WHERE job_class = 'old_2d';
SELECT is(pgbus.cleanup_job_stats(), 2, 'cleanup_job_stats: by default removes stats over 30 days old');
SELECT results_eq(
    $$SELECT job_class FROM pgbus.job_stats ORDER BY created_at$$,
    $$VALUES ('old_29d'::text), ('old_2d'), ('new')$$,
    'cleanup_job_stats: newer stats stay');
SELECT is(pgbus.cleanup_job_stats(), 0, 'cleanup_job_stats: nothing more to remove');
SELECT is(pgbus.cleanup_job_stats(interval '1 day'), 2, 'cleanup_job_stats: retention sets the threshold');
SELECT results_eq($$SELECT job_class FROM pgbus.job_stats$$, $$VALUES ('new'::text)$$, 'cleanup_job_stats: the stat of now stays');
SELECT is(pgbus.cleanup_job_stats(interval '0'), 0, 'cleanup_job_stats: a stat of now is not older than now');

SELECT * FROM finish();
ROLLBACK;
