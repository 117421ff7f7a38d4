-- pgTAP tests for sql/functions/040_processes.sql and sql/functions/050_maintenance.sql: cleanup_batches: only finished batches, finished long enough ago.
-- (Split from processes_and_maintenance.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(11);
\ir ../include/processes_and_maintenance_setup.psql
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

SELECT * FROM finish();
ROLLBACK;
