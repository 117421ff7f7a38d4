-- pgTAP tests for sql/functions/010_queues.sql: enqueue.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(32);
\ir ../include/queues_setup.psql
-------------------------------------------------------------------------------------------------
-- enqueue
-------------------------------------------------------------------------------------------------
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_queues_b'), 'enqueue: t_queues_b does not exist yet');
INSERT INTO t_ids SELECT 'b', id FROM pgbus.enqueue('t_queues_b', 'Mailer',
    ARRAY['{"args": [1]}', '{"args": [2], "kwargs": {"x": true}}', '{"args": [3]}']::jsonb[]) AS id;
SELECT is((SELECT count(*) FROM t_ids WHERE name = 'b'), 3::bigint, 'enqueue: returns one msg_id per argument set');
SELECT ok(EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_queues_b'), 'enqueue: creates the queue when missing');
SELECT is((SELECT throttle_interval_ms FROM pgmq.notify_insert_throttle WHERE queue_name = 't_queues_b'), 250,
          'enqueue: a queue it creates has insert notifications');
SELECT results_eq(
    $$SELECT msg_id FROM pgmq.q_t_queues_b ORDER BY msg_id$$,
    $$SELECT id FROM t_ids WHERE name = 'b' ORDER BY id$$,
    'enqueue: the returned ids are the messages in the queue');
SELECT results_eq(
    $$SELECT message -> 'args', message -> 'kwargs' FROM pgmq.q_t_queues_b ORDER BY msg_id$$,
    $$VALUES ('[1]'::jsonb, '{}'::jsonb), ('[2]', '{"x": true}'), ('[3]', '{}')$$,
    'enqueue: messages carry their args and kwargs, in the order given');
SELECT ok((SELECT bool_and(message ->> 'job_class' = 'Mailer' AND message ->> 'queue' = 't_queues_b'
                           AND NOT message ? 'batch_id' AND NOT message ? 'scheduled_at')
           FROM pgmq.q_t_queues_b),
          'enqueue: each message is the job envelope (class, queue; no batch, not scheduled)');
INSERT INTO t_ids SELECT 'nullkw', id FROM pgbus.enqueue('t_queues_quiet', 'Mailer', ARRAY['{"kwargs": {"cc": null}}']::jsonb[]) AS id;
SELECT is((SELECT message -> 'kwargs' FROM pgmq.q_t_queues_quiet WHERE msg_id = (SELECT id FROM t_ids WHERE name = 'nullkw')),
          '{"cc": null}'::jsonb, 'enqueue: a kwarg passed as null (None) reaches the job');
SELECT ok((SELECT bool_and(vt <= clock_timestamp() AND read_ct = 0) FROM pgmq.q_t_queues_b),
          'enqueue: without run_at the messages are visible at once and unread');

-- Nothing to enqueue.
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_queues_b', 'Mailer', ARRAY[]::jsonb[])), 0::bigint,
          'enqueue: an empty arguments array returns no ids');
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_queues_b', 'Mailer', NULL)), 0::bigint,
          'enqueue: NULL arguments return no ids');
SELECT is((SELECT count(*) FROM pgmq.q_t_queues_b), 3::bigint, 'enqueue: empty arguments sent nothing');
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_queues_never', 'Mailer', '{}')), 0::bigint,
          'enqueue: empty arguments into a missing queue returns no ids');

-- Refusals.
SELECT throws_ok($$SELECT * FROM pgbus.enqueue('t_queues_b', '', ARRAY['{}']::jsonb[])$$,
                 '22023', 'pgbus: a job needs a class name', 'enqueue: refuses an empty job class');
SELECT throws_ok($$SELECT * FROM pgbus.enqueue('t_queues_b', '   ', ARRAY['{}']::jsonb[])$$,
                 '22023', 'pgbus: a job needs a class name', 'enqueue: refuses a blank job class');
SELECT throws_ok($$SELECT * FROM pgbus.enqueue('t_queues_b', NULL, ARRAY['{}']::jsonb[])$$,
                 '22023', 'pgbus: a job needs a class name', 'enqueue: refuses a NULL job class');
SELECT throws_ok($$SELECT * FROM pgbus.enqueue('T_Queues_B', 'Mailer', ARRAY['{}']::jsonb[])$$,
                 '22023', 'pgbus: invalid queue name ''T_Queues_B''', 'enqueue: refuses an invalid queue name');
SELECT throws_ok($$SELECT * FROM pgbus.enqueue(NULL, 'Mailer', ARRAY['{}']::jsonb[])$$,
                 '22023', 'pgbus: invalid queue name NULL', 'enqueue: refuses a NULL queue name');
SELECT is((SELECT count(*) FROM pgmq.q_t_queues_b), 3::bigint, 'enqueue: refused calls sent nothing');

-- run_at: scheduled messages stay invisible until then; a past run_at is visible now.
INSERT INTO t_ids SELECT 'later', id FROM pgbus.enqueue('t_queues_c', 'Report', ARRAY['{}']::jsonb[],
                                                        now() + interval '1 hour') AS id;
SELECT is((SELECT vt FROM pgmq.q_t_queues_c WHERE msg_id = (SELECT id FROM t_ids WHERE name = 'later')),
          now() + interval '1 hour', 'enqueue: run_at sets when the message becomes visible');
SELECT is((SELECT (message ->> 'scheduled_at')::timestamptz FROM pgmq.q_t_queues_c
           WHERE msg_id = (SELECT id FROM t_ids WHERE name = 'later')),
          now() + interval '1 hour', 'enqueue: run_at is recorded as scheduled_at');
INSERT INTO t_ids SELECT 'past', id FROM pgbus.enqueue('t_queues_c', 'Report', ARRAY['{}']::jsonb[],
                                                       now() - interval '1 hour') AS id;
SELECT ok((SELECT vt <= clock_timestamp() FROM pgmq.q_t_queues_c WHERE msg_id = (SELECT id FROM t_ids WHERE name = 'past')),
          'enqueue: a run_at in the past is visible at once');

-- Batches: members join an open batch and count in total_jobs.
CREATE TEMP TABLE t_batch AS SELECT pgbus.batch_open('queues test') AS id;
INSERT INTO t_ids SELECT 'member', id FROM pgbus.enqueue('t_queues_d', 'Member',
    ARRAY['{"args": [1]}', '{"args": [2]}']::jsonb[], NULL, (SELECT id FROM t_batch)) AS id;
SELECT is((SELECT total_jobs FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch)), 2,
          'enqueue: members count in the batch''s total_jobs');
SELECT ok((SELECT bool_and(message ->> 'batch_id' = (SELECT id FROM t_batch)::text) FROM pgmq.q_t_queues_d),
          'enqueue: members carry the batch_id');
SELECT lives_ok(format($$SELECT * FROM pgbus.enqueue('t_queues_d', 'Member', ARRAY['{}']::jsonb[], NULL, %L)$$,
                       (SELECT id FROM t_batch)),
                'enqueue: more members can join while the batch is open');
SELECT is((SELECT total_jobs FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch)), 3,
          'enqueue: total_jobs adds up over calls');
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_queues_d', 'Member', ARRAY[]::jsonb[], NULL, (SELECT id FROM t_batch))),
          0::bigint, 'enqueue: an empty arguments array adds no member');
SELECT is((SELECT total_jobs FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch)), 3,
          'enqueue: an empty arguments array leaves total_jobs alone');
UPDATE pgbus.batches SET status = 'processing' WHERE batch_id = (SELECT id FROM t_batch);
SELECT throws_ok(format($$SELECT * FROM pgbus.enqueue('t_queues_d', 'Member', ARRAY['{}']::jsonb[], NULL, %L)$$,
                        (SELECT id FROM t_batch)),
                 '55000', format('pgbus: batch %s is not open for new jobs', (SELECT id FROM t_batch)),
                 'enqueue: refuses a batch that is no longer open');
SELECT is((SELECT total_jobs FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch)), 3,
          'enqueue: a refused member does not count');
SELECT is((SELECT count(*) FROM pgmq.q_t_queues_d), 3::bigint, 'enqueue: a refused member is not sent');
SELECT throws_ok($$SELECT * FROM pgbus.enqueue('t_queues_d', 'Member', ARRAY['{}']::jsonb[], NULL,
                                               '00000000-0000-0000-0000-000000000000')$$,
                 '55000', 'pgbus: batch 00000000-0000-0000-0000-000000000000 is not open for new jobs',
                 'enqueue: refuses a batch that does not exist');

SELECT * FROM finish();
ROLLBACK;
