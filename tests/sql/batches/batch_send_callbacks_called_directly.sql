-- pgTAP tests for sql/functions/020_batches.sql: batch_send_callbacks, called directly with a batch row.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(7);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- batch_send_callbacks, called directly with a batch row.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('direct_ok', pg_temp.open('direct_ok'));
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_ok')),
                'batch_send_callbacks: runs on a batch row');
SELECT is(pg_temp.sent_all('direct_ok'), ARRAY[1, 1, 0]::bigint[],
          'batch_send_callbacks: nothing discarded sends on_complete and on_success');
INSERT INTO t_b VALUES ('direct_bad', pg_temp.open('direct_bad'));
UPDATE pgbus.batches SET total_jobs = 3, completed_jobs = 1, discarded_jobs = 2 WHERE batch_id = pg_temp.b('direct_bad');
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_bad')),
                'batch_send_callbacks: runs on a batch row with discards');
SELECT is(pg_temp.sent_all('direct_bad'), ARRAY[1, 0, 1]::bigint[],
          'batch_send_callbacks: something discarded sends on_complete and on_discard');
INSERT INTO t_b VALUES ('direct_some', pgbus.batch_open('p', '{"case": "direct_some"}', NULL,
                                                        '{"job_class": "OnSuccess", "queue": "t_batches_ok"}'));
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_some')),
                'batch_send_callbacks: runs on a batch row with only on_success');
SELECT is(pg_temp.sent_all('direct_some'), ARRAY[0, 1, 0]::bigint[], 'batch_send_callbacks: NULL callbacks are skipped');
SELECT results_eq(
    $$SELECT message ->> 'job_class', message -> 'args', message -> 'kwargs'
      FROM pgmq.q_t_batches_ok WHERE message -> 'args' -> 0 ->> 'case' = 'direct_some'$$,
    $$VALUES ('OnSuccess'::text, '[{"case": "direct_some"}]'::jsonb, '{}'::jsonb)$$,
    'batch_send_callbacks: the job has the callback''s class and the properties as its single arg');

SELECT * FROM finish();
ROLLBACK;
