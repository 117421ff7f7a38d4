-- pgTAP tests for sql/functions/020_batches.sql: batch_open; batch_close: an empty batch finishes at close.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(35);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- batch_open
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('defaults', pgbus.batch_open());
SELECT results_eq(
    $$SELECT description, properties, on_complete, on_success, on_discard, total_jobs, completed_jobs,
             discarded_jobs, status, created_at, finished_at
      FROM pgbus.batches WHERE batch_id = pg_temp.b('defaults')$$,
    $$VALUES (NULL::text, '{}'::jsonb, NULL::jsonb, NULL::jsonb, NULL::jsonb, 0, 0, 0, 'open'::text, now(), NULL::timestamptz)$$,
    'batch_open: with defaults, an open, empty batch with no properties and no callbacks');

INSERT INTO t_b VALUES ('full', pgbus.batch_open(
    'nightly import', '{"case": "full", "nested": {"a": [1, 2]}, "s": "x"}',
    '{"job_class": "OnComplete", "queue": "t_batches_done"}',
    '{"job_class": "OnSuccess", "queue": "t_batches_ok"}',
    '{"job_class": "OnDiscard", "queue": "t_batches_bad"}'));
SELECT results_eq(
    $$SELECT description, properties, on_complete, on_success, on_discard, status
      FROM pgbus.batches WHERE batch_id = pg_temp.b('full')$$,
    $$VALUES ('nightly import'::text, '{"case": "full", "nested": {"a": [1, 2]}, "s": "x"}'::jsonb,
              '{"job_class": "OnComplete", "queue": "t_batches_done"}'::jsonb,
              '{"job_class": "OnSuccess", "queue": "t_batches_ok"}'::jsonb,
              '{"job_class": "OnDiscard", "queue": "t_batches_bad"}'::jsonb, 'open'::text)$$,
    'batch_open: stores description, properties and callbacks');
SELECT isnt(pg_temp.b('full'), pg_temp.b('defaults'), 'batch_open: every batch gets its own id');

INSERT INTO t_b VALUES ('nullprops', pgbus.batch_open('p', NULL));
SELECT is((SELECT properties FROM pgbus.batches WHERE batch_id = pg_temp.b('nullprops')), '{}'::jsonb,
          'batch_open: NULL properties are stored as {}');

-- Refusals.
INSERT INTO t_n SELECT 'before refusals', count(*) FROM pgbus.batches;
SELECT throws_ok($$SELECT pgbus.batch_open('x', '[]')$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses array properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '"text"')$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses string properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '42')$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses number properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', 'null'::jsonb)$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses JSON null properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": "X"}')$$, '22023',
                 'pgbus: a batch callback is {"job_class": ..., "queue": ...}, got {"job_class": "X"}',
                 'batch_open: refuses an on_complete without a queue');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_success => '{"queue": "t_batches_ok"}')$$, '22023', NULL,
                 'batch_open: refuses an on_success without a job_class');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_discard => '[{"job_class": "X", "queue": "t_batches_bad"}]')$$,
                 '22023', NULL, 'batch_open: refuses an on_discard that is an array');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '"t_batches_done"')$$, '22023', NULL,
                 'batch_open: refuses a callback that is a string');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": null, "queue": "t_batches_done"}')$$,
                 '22023', NULL, 'batch_open: refuses a callback whose job_class is JSON null');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": "X", "queue": null}')$$,
                 '22023', NULL, 'batch_open: refuses a callback whose queue is JSON null');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', NULL, NULL, '{}')$$, '22023', NULL,
                 'batch_open: refuses an empty callback object');
SELECT is((SELECT count(*) FROM pgbus.batches), (SELECT n FROM t_n WHERE name = 'before refusals'),
          'batch_open: refused calls created no batch');
-- A callback that could never be sent would make the batch's last member fail at finish time.
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": "X", "queue": "Not A Queue"}')$$,
                 '22023', NULL, 'batch_open: refuses a callback whose queue is not a valid queue name');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_success => '{"job_class": "", "queue": "t_batches_ok"}')$$,
                 '22023', NULL, 'batch_open: refuses a callback with an empty job_class');

-------------------------------------------------------------------------------------------------
-- batch_close: an empty batch finishes at close.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('empty', pg_temp.open('empty'));
SELECT is(pgbus.batch_close(pg_temp.b('empty')), true, 'batch_close: an empty batch finishes at close (true)');
SELECT results_eq(
    $$SELECT status, finished_at FROM pgbus.batches WHERE batch_id = pg_temp.b('empty')$$,
    $$VALUES ('finished'::text, now())$$,
    'batch_close: the empty batch is finished, finished_at set');
SELECT is(pg_temp.sent_all('empty'), ARRAY[1, 1, 0]::bigint[],
          'batch_close: an empty batch sends on_complete and on_success, not on_discard');
SELECT results_eq(
    $$SELECT message FROM pgmq.q_t_batches_done WHERE message -> 'args' -> 0 ->> 'case' = 'empty'$$,
    $$SELECT message FROM pgmq.q_t_batches_done WHERE message ->> 'job_class' = 'OnComplete'
                                                  AND message -> 'args' = '[{"case": "empty"}]'
                                                  AND message -> 'kwargs' = '{}'
                                                  AND message ->> 'queue' = 't_batches_done'
                                                  AND NOT message ? 'batch_id'$$,
    'batch callbacks: a job of the callback''s class in its queue, args [properties], kwargs {}, in no batch');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('empty')), false, 'batch_finish_if_done: a finished batch is not finished again');
SELECT is(pg_temp.sent_all('empty'), ARRAY[1, 1, 0]::bigint[], 'batch_finish_if_done: callbacks are not sent twice');
SELECT throws_ok(format('SELECT pgbus.batch_close(%L)', pg_temp.b('empty')), '55000',
                 format('pgbus: batch %s is not open', pg_temp.b('empty')),
                 'batch_close: refuses a batch that is already finished');
SELECT throws_ok(format($$SELECT * FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}']::jsonb[], NULL, %L)$$, pg_temp.b('empty')),
                 '55000', format('pgbus: batch %s is not open for new jobs', pg_temp.b('empty')),
                 'enqueue: a finished batch takes no new members');
SELECT throws_ok($$SELECT pgbus.batch_close('00000000-0000-0000-0000-000000000000')$$, '55000',
                 'pgbus: batch 00000000-0000-0000-0000-000000000000 is not open',
                 'batch_close: refuses a batch that does not exist');

-- The batch's properties travel to the callbacks as they are.
SELECT is(pgbus.batch_close(pg_temp.b('full')), true, 'batch_close: the empty "full" batch finishes');
SELECT is((SELECT message -> 'args' FROM pgmq.q_t_batches_ok WHERE message -> 'args' -> 0 ->> 'case' = 'full'),
          '[{"case": "full", "nested": {"a": [1, 2]}, "s": "x"}]'::jsonb,
          'batch callbacks: the single arg is the batch''s properties');
INSERT INTO t_b VALUES ('nullprop', pgbus.batch_open('p', '{"case": "nullprop", "note": null}',
                                                     '{"job_class": "OnComplete", "queue": "t_batches_done"}'));
SELECT is(pgbus.batch_close(pg_temp.b('nullprop')), true, 'batch_close: the empty "nullprop" batch finishes');
SELECT is((SELECT message -> 'args' FROM pgmq.q_t_batches_done WHERE message -> 'args' -> 0 ->> 'case' = 'nullprop'),
          '[{"case": "nullprop", "note": null}]'::jsonb,
          'batch callbacks: properties holding a null value reach the callback unchanged');

-- A batch without callbacks finishes and sends nothing; a callback queue is created when missing.
INSERT INTO t_n SELECT 'callbacks before', (SELECT count(*) FROM pgmq.q_t_batches_done) + (SELECT count(*) FROM pgmq.q_t_batches_ok)
                                           + (SELECT count(*) FROM pgmq.q_t_batches_bad);
SELECT is(pgbus.batch_close(pg_temp.b('defaults')), true, 'batch_close: an empty batch without callbacks finishes');
SELECT is((SELECT count(*) FROM pgmq.q_t_batches_done) + (SELECT count(*) FROM pgmq.q_t_batches_ok)
          + (SELECT count(*) FROM pgmq.q_t_batches_bad), (SELECT n FROM t_n WHERE name = 'callbacks before'),
          'batch_close: a batch without callbacks sends nothing');
INSERT INTO t_b VALUES ('newq', pgbus.batch_open('p', '{"case": "newq"}', '{"job_class": "OnComplete", "queue": "t_batches_new"}'));
SELECT is(pgbus.batch_close(pg_temp.b('newq')), true, 'batch_close: a batch whose callback queue is missing finishes');
SELECT is(pg_temp.sent('t_batches_new', 'newq'), 1::bigint, 'batch callbacks: the callback queue is created and gets the job');

SELECT * FROM finish();
ROLLBACK;
