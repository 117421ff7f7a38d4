-- pgTAP tests for sql/functions/010_queues.sql:
-- pgbus.ensure_queue, job_envelope, enqueue, read_jobs, extend_visibility, retry_delay.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(133);

-- Scratch space for ids captured between statements (dropped by the ROLLBACK).
CREATE TEMP TABLE t_ids (name text, id bigint);
CREATE TEMP TABLE t_env (name text, env jsonb);
-- Runs a query returning one value and gives it as text, or the error it raised as 'ERROR: ...'
-- (so an unexpected error fails one test instead of aborting the whole file).
CREATE FUNCTION pg_temp.eval(query text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    result text;
BEGIN
    EXECUTE query INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR: ' || SQLERRM;
END;
$f$;

-------------------------------------------------------------------------------------------------
-- The functions exist with the documented signatures.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'ensure_queue', ARRAY['text', 'boolean'], 'pgbus.ensure_queue(text, boolean) exists');
SELECT has_function('pgbus', 'job_envelope', ARRAY['text', 'text', 'jsonb', 'timestamp with time zone', 'uuid'],
                    'pgbus.job_envelope(text, text, jsonb, timestamptz, uuid) exists');
SELECT has_function('pgbus', 'enqueue', ARRAY['text', 'text', 'jsonb[]', 'timestamp with time zone', 'uuid'],
                    'pgbus.enqueue(text, text, jsonb[], timestamptz, uuid) exists');
SELECT has_function('pgbus', 'read_jobs', ARRAY['text[]', 'integer', 'integer', 'text', 'text', 'text', 'integer'],
                    'pgbus.read_jobs(text[], integer, integer, text, text, text, integer) exists');
SELECT has_function('pgbus', 'extend_visibility', ARRAY['text', 'bigint[]', 'integer'],
                    'pgbus.extend_visibility(text, bigint[], integer) exists');
SELECT has_function('pgbus', 'retry_delay', ARRAY['integer', 'interval', 'interval', 'double precision'],
                    'pgbus.retry_delay(integer, interval, interval, float8) exists');

-------------------------------------------------------------------------------------------------
-- ensure_queue
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.ensure_queue('t_queues_a'), true, 'ensure_queue: creates a missing queue and returns true');
SELECT ok(EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_queues_a'), 'ensure_queue: the queue is in pgmq.meta');
SELECT has_table('pgmq', 'q_t_queues_a', 'ensure_queue: the queue table pgmq.q_t_queues_a exists');
SELECT has_table('pgmq', 'a_t_queues_a', 'ensure_queue: the archive table pgmq.a_t_queues_a exists');
SELECT is(pgbus.ensure_queue('t_queues_a'), false, 'ensure_queue: an existing queue returns false');
SELECT is(pgbus.ensure_queue('t_queues_a', false), false, 'ensure_queue: an existing queue returns false (notify => false)');
SELECT is((SELECT count(*) FROM pgmq.meta WHERE queue_name = 't_queues_a'), 1::bigint,
          'ensure_queue: calling it again does not duplicate the queue');

-- Notifications: on by default (250 ms throttle), off when asked.
SELECT is((SELECT throttle_interval_ms FROM pgmq.notify_insert_throttle WHERE queue_name = 't_queues_a'), 250,
          'ensure_queue: notify defaults to on, throttled at 250 ms');
SELECT has_trigger('pgmq', 'q_t_queues_a', 'trigger_notify_queue_insert_listeners',
                   'ensure_queue: the insert-notify trigger is on the queue table');
SELECT is(pgbus.ensure_queue('t_queues_quiet', false), true, 'ensure_queue(notify => false): creates the queue');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.notify_insert_throttle WHERE queue_name = 't_queues_quiet'),
          'ensure_queue(notify => false): no notify throttle row');
SELECT hasnt_trigger('pgmq', 'q_t_queues_quiet', 'trigger_notify_queue_insert_listeners',
                     'ensure_queue(notify => false): no insert-notify trigger');

-- Valid names at the edges.
SELECT is(pgbus.ensure_queue(repeat('z', 43)), true, 'ensure_queue: a 43-character name is accepted');
SELECT is(pgbus.ensure_queue(repeat('z', 43) || '_dlq'), true, 'ensure_queue: its 47-character dead letter queue too');
SELECT is(pgbus.ensure_queue('t_0'), true, 'ensure_queue: a name with a-z, 0-9 and _ is accepted');
SELECT is(pgbus.ensure_queue('9'), true, 'ensure_queue: a 1-character name is accepted');

-- Refusals.
SELECT throws_ok($$SELECT pgbus.ensure_queue(NULL)$$, '22023', 'pgbus: invalid queue name NULL',
                 'ensure_queue: refuses NULL');
SELECT throws_ok($$SELECT pgbus.ensure_queue('')$$, '22023', 'pgbus: invalid queue name ''''',
                 'ensure_queue: refuses the empty name');
SELECT throws_ok($$SELECT pgbus.ensure_queue('T_Queues_Upper')$$, '22023', 'pgbus: invalid queue name ''T_Queues_Upper''',
                 'ensure_queue: refuses upper case');
SELECT throws_ok(format('SELECT pgbus.ensure_queue(%L)', repeat('z', 44)), '22023',
                 'pgbus: invalid queue name ' || quote_literal(repeat('z', 44)),
                 'ensure_queue: refuses a 44-character name (its dead letter queue would not fit)');
SELECT throws_ok($$SELECT pgbus.ensure_queue('t-queues')$$, '22023', NULL, 'ensure_queue: refuses a hyphen');
SELECT throws_ok($$SELECT pgbus.ensure_queue('t queues')$$, '22023', NULL, 'ensure_queue: refuses a space');
SELECT throws_ok($$SELECT pgbus.ensure_queue('t_queues;drop')$$, '22023', NULL, 'ensure_queue: refuses a semicolon');
SELECT throws_ok($$SELECT pgbus.ensure_queue('t_queues_é')$$, '22023', NULL, 'ensure_queue: refuses non-ASCII letters');
SELECT throws_ok($$SELECT pgbus.ensure_queue(E't_queues_nl\n')$$, '22023', NULL,
                 'ensure_queue: refuses a trailing newline');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name IN ('T_Queues_Upper', 't_queues_upper', repeat('z', 44), 't-queues')),
          'ensure_queue: refused names created no queue');

-------------------------------------------------------------------------------------------------
-- job_envelope
-------------------------------------------------------------------------------------------------
INSERT INTO t_env VALUES
    ('plain', pgbus.job_envelope('t_queues_env', 'Mailer', '{"args": [1, "two"], "kwargs": {"k": "v"}}', NULL, NULL)),
    ('empty', pgbus.job_envelope('t_queues_env', 'Mailer', '{}', NULL, NULL)),
    ('null',  pgbus.job_envelope('t_queues_env', 'Mailer', NULL, NULL, NULL)),
    ('full',  pgbus.job_envelope('t_queues_env', 'Mailer', '{"args": []}', '2031-02-03 04:05:06+00',
                                 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')),
    ('nulls', pgbus.job_envelope('t_queues_env', 'Mailer',
                                 '{"args": [null, {"a": null}], "kwargs": {"note": null, "n": 1}}', NULL, NULL));

SELECT is((SELECT array_agg(k ORDER BY k) FROM t_env, jsonb_object_keys(env) k WHERE name = 'plain'),
          ARRAY['args', 'enqueued_at', 'job_class', 'job_id', 'kwargs', 'queue'],
          'job_envelope: without run_at and batch_id it has exactly job_class, job_id, queue, args, kwargs, enqueued_at');
SELECT is((SELECT env ->> 'job_class' FROM t_env WHERE name = 'plain'), 'Mailer', 'job_envelope: carries the job class');
SELECT is((SELECT env ->> 'queue' FROM t_env WHERE name = 'plain'), 't_queues_env', 'job_envelope: carries the queue');
SELECT is((SELECT env -> 'args' FROM t_env WHERE name = 'plain'), '[1, "two"]'::jsonb, 'job_envelope: carries args');
SELECT is((SELECT env -> 'kwargs' FROM t_env WHERE name = 'plain'), '{"k": "v"}'::jsonb, 'job_envelope: carries kwargs');
SELECT is((SELECT (env ->> 'enqueued_at')::timestamptz FROM t_env WHERE name = 'plain'), now(),
          'job_envelope: enqueued_at is now()');
SELECT lives_ok($$SELECT (env ->> 'job_id')::uuid FROM t_env$$, 'job_envelope: job_id is a UUID');
SELECT is((SELECT count(DISTINCT env ->> 'job_id') FROM t_env), (SELECT count(*) FROM t_env),
          'job_envelope: every envelope gets its own job_id');
SELECT is((SELECT env -> 'args' FROM t_env WHERE name = 'empty'), '[]'::jsonb, 'job_envelope: missing args become []');
SELECT is((SELECT env -> 'kwargs' FROM t_env WHERE name = 'empty'), '{}'::jsonb, 'job_envelope: missing kwargs become {}');
SELECT is((SELECT jsonb_build_array(env -> 'args', env -> 'kwargs') FROM t_env WHERE name = 'null'), '[[], {}]'::jsonb,
          'job_envelope: NULL arguments give args [] and kwargs {}');
SELECT is((SELECT (env ->> 'scheduled_at')::timestamptz FROM t_env WHERE name = 'full'), '2031-02-03 04:05:06+00'::timestamptz,
          'job_envelope: scheduled_at is run_at');
SELECT is((SELECT env ->> 'batch_id' FROM t_env WHERE name = 'full'), 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
          'job_envelope: carries batch_id');
SELECT is((SELECT env -> 'args' FROM t_env WHERE name = 'nulls'), '[null, {"a": null}]'::jsonb,
          'job_envelope: null values inside args are kept as given');
SELECT is((SELECT env -> 'kwargs' FROM t_env WHERE name = 'nulls'), '{"note": null, "n": 1}'::jsonb,
          'job_envelope: null-valued kwargs are kept as given');

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

-------------------------------------------------------------------------------------------------
-- read_jobs
-------------------------------------------------------------------------------------------------
SELECT lives_ok($$SELECT * FROM pgbus.enqueue('t_queues_r1', 'R', ARRAY['{"args": ["r1-1"]}', '{"args": ["r1-2"]}']::jsonb[])$$,
                'read_jobs setup: two messages in t_queues_r1');
SELECT lives_ok($$SELECT * FROM pgbus.enqueue('t_queues_r2', 'R',
                  ARRAY['{"args": ["r2-1"]}', '{"args": ["r2-2"]}', '{"args": ["r2-3"]}']::jsonb[])$$,
                'read_jobs setup: three messages in t_queues_r2');

CREATE TEMP TABLE t_read AS
    SELECT * FROM pgbus.read_jobs(ARRAY['t_queues_missing', 't_queues_r1', 't_queues_r2'], 30, 4);
SELECT results_eq(
    $$SELECT queue, message -> 'args' ->> 0 FROM t_read$$,
    $$VALUES ('t_queues_r1'::text, 'r1-1'::text), ('t_queues_r1', 'r1-2'), ('t_queues_r2', 'r2-1'), ('t_queues_r2', 'r2-2')$$,
    'read_jobs: passes over a missing queue, reads earlier queues first, stops at qty');
SELECT ok((SELECT bool_and(read_ct = 1) FROM t_read), 'read_jobs: read_ct is 1 on the first read');
SELECT ok((SELECT bool_and(vt > clock_timestamp() + interval '25 seconds' AND vt <= clock_timestamp() + interval '30 seconds')
           FROM t_read),
          'read_jobs: read messages are hidden for vt_seconds');
SELECT ok((SELECT bool_and(enqueued_at = now() AND message ->> 'job_class' = 'R') FROM t_read),
          'read_jobs: returns enqueued_at and the message body');
SELECT results_eq(
    $$SELECT msg_id FROM t_read WHERE queue = 't_queues_r1' ORDER BY msg_id$$,
    $$SELECT msg_id FROM pgmq.q_t_queues_r1 WHERE read_ct = 1 ORDER BY msg_id$$,
    'read_jobs: msg_id identifies the message in its queue');
SELECT results_eq(
    $$SELECT queue, message -> 'args' ->> 0 FROM pgbus.read_jobs(ARRAY['t_queues_r1', 't_queues_r2'], 30, 10)$$,
    $$VALUES ('t_queues_r2'::text, 'r2-3'::text)$$,
    'read_jobs: messages already read are invisible; only the rest is read');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['t_queues_r1', 't_queues_r2'], 30, 10)), 0::bigint,
          'read_jobs: nothing left to read');

-- Priority order follows the array, and qty across queues.
SELECT lives_ok($$SELECT * FROM pgbus.enqueue('t_queues_p1', 'P', ARRAY['{"args": ["p1"]}', '{"args": ["p1"]}']::jsonb[])$$,
                'read_jobs setup: two messages in t_queues_p1');
SELECT lives_ok($$SELECT * FROM pgbus.enqueue('t_queues_p2', 'P', ARRAY['{"args": ["p2"]}', '{"args": ["p2"]}']::jsonb[])$$,
                'read_jobs setup: two messages in t_queues_p2');
SELECT results_eq(
    $$SELECT queue FROM pgbus.read_jobs(ARRAY['t_queues_p2', 't_queues_p1'], 30, 1)$$,
    $$VALUES ('t_queues_p2'::text)$$,
    'read_jobs: qty 1 reads only from the first queue in the array');
SELECT results_eq(
    $$SELECT queue FROM pgbus.read_jobs(ARRAY['t_queues_p2', 't_queues_p1'], 30, 2)$$,
    $$VALUES ('t_queues_p2'::text), ('t_queues_p1')$$,
    'read_jobs: fills up qty from the next queue when the first runs dry');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['t_queues_p1'], 30, 0)), 0::bigint, 'read_jobs: qty 0 reads nothing');
SELECT throws_ok($$SELECT * FROM pgbus.read_jobs(ARRAY['t_queues_p1'], 30, -1)$$, '22023', NULL,
                 'read_jobs: a negative qty is refused');
SELECT throws_ok($$SELECT * FROM pgbus.read_jobs(ARRAY['t_queues_p1'], 30, NULL)$$, '22023', NULL,
                 'read_jobs: a NULL qty is refused');
SELECT is((SELECT read_ct FROM pgmq.q_t_queues_p1 WHERE read_ct = 0 LIMIT 1), 0,
          'read_jobs: qty 0 left the message unread');

-- Scheduled messages are not read before their time.
SELECT lives_ok($$SELECT * FROM pgbus.enqueue('t_queues_s', 'S', ARRAY['{"args": ["later"]}']::jsonb[], now() + interval '1 hour')$$,
                'read_jobs setup: a message scheduled in an hour');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['t_queues_s'], 30, 10)), 0::bigint,
          'read_jobs: a message scheduled in the future is not read');
SELECT lives_ok($$SELECT * FROM pgbus.enqueue('t_queues_s', 'S', ARRAY['{"args": ["now"]}']::jsonb[])$$,
                'read_jobs setup: a message due now');
SELECT results_eq(
    $$SELECT message -> 'args' ->> 0 FROM pgbus.read_jobs(ARRAY['t_queues_s'], 30, 10)$$,
    $$VALUES ('now'::text)$$,
    'read_jobs: reads the due message and leaves the scheduled one');

-- Empty / missing input and refusals.
SELECT is((SELECT count(*) FROM pgbus.read_jobs(NULL, 30, 10)), 0::bigint, 'read_jobs: NULL queues read nothing');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY[]::text[], 30, 10)), 0::bigint, 'read_jobs: no queues read nothing');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['t_queues_missing'], 30, 10)), 0::bigint,
          'read_jobs: only missing queues read nothing (no error)');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_queues_missing'),
          'read_jobs: does not create missing queues');
SELECT throws_ok($$SELECT * FROM pgbus.read_jobs(ARRAY['t_queues_r1'], 0, 10)$$,
                 '22023', 'pgbus: read_jobs needs vt_seconds >= 1 and qty >= 0', 'read_jobs: refuses vt_seconds 0');
SELECT throws_ok($$SELECT * FROM pgbus.read_jobs(ARRAY['t_queues_r1'], -5, 10)$$,
                 '22023', 'pgbus: read_jobs needs vt_seconds >= 1 and qty >= 0', 'read_jobs: refuses a negative vt_seconds');
SELECT throws_ok($$SELECT * FROM pgbus.read_jobs(ARRAY['t_queues_r1'], NULL, 10)$$,
                 '22023', 'pgbus: read_jobs needs vt_seconds >= 1 and qty >= 0', 'read_jobs: refuses a NULL vt_seconds');

-------------------------------------------------------------------------------------------------
-- extend_visibility
-------------------------------------------------------------------------------------------------
INSERT INTO t_ids SELECT 'v', id FROM pgbus.enqueue('t_queues_v', 'V', ARRAY['{}', '{}', '{}']::jsonb[]) AS id;
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['t_queues_v'], 1, 3)), 3::bigint,
          'extend_visibility setup: three messages read with a 1 s visibility timeout');
SELECT is(pgbus.extend_visibility('t_queues_v', (SELECT array_agg(id) FROM t_ids WHERE name = 'v'), 600), 3,
          'extend_visibility: counts every message still there');
SELECT ok((SELECT bool_and(vt > clock_timestamp() + interval '590 seconds') FROM pgmq.q_t_queues_v),
          'extend_visibility: the messages are hidden for another vt_seconds');
SELECT ok((SELECT bool_and(read_ct = 1) FROM pgmq.q_t_queues_v), 'extend_visibility: does not count as a read');
SELECT ok(pgmq.archive('t_queues_v', (SELECT min(id) FROM t_ids WHERE name = 'v')), 'extend_visibility setup: one message archived');
SELECT is(pgbus.extend_visibility('t_queues_v', (SELECT array_agg(id) FROM t_ids WHERE name = 'v'), 600), 2,
          'extend_visibility: an archived message is not counted');
SELECT is(pgbus.extend_visibility('t_queues_v', ARRAY[999999]::bigint[], 600), 0,
          'extend_visibility: unknown ids count 0');
SELECT is(pgbus.extend_visibility('t_queues_v', ARRAY[]::bigint[], 600), 0,
          'extend_visibility: no ids count 0');

-------------------------------------------------------------------------------------------------
-- retry_delay
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.retry_delay(1, interval '10 seconds', interval '1 hour', 0), interval '10 seconds',
          'retry_delay: attempt 1 waits base');
SELECT is(pgbus.retry_delay(2, interval '10 seconds', interval '1 hour', 0), interval '20 seconds',
          'retry_delay: attempt 2 waits 2 x base');
SELECT is(pgbus.retry_delay(5, interval '10 seconds', interval '1 hour', 0), interval '160 seconds',
          'retry_delay: attempt 5 waits 16 x base');
SELECT is(pgbus.retry_delay(0, interval '10 seconds', interval '1 hour', 0), interval '10 seconds',
          'retry_delay: attempt 0 counts as the first');
SELECT is(pgbus.retry_delay(-3, interval '10 seconds', interval '1 hour', 0), interval '10 seconds',
          'retry_delay: a negative attempt counts as the first');
SELECT is(pgbus.retry_delay(20, interval '10 seconds', interval '1 hour', 0), interval '1 hour',
          'retry_delay: capped at cap');
SELECT is(pgbus.retry_delay(1, interval '2 hours', interval '1 hour', 0), interval '1 hour',
          'retry_delay: a base above cap is capped');
SELECT is(pgbus.retry_delay(3, interval '0', interval '1 hour', 0), interval '0',
          'retry_delay: a zero base waits nothing');
SELECT is(pgbus.retry_delay(2147483647, interval '1 second', interval '1 hour', 0), interval '1 hour',
          'retry_delay: the largest attempt does not overflow and is the cap');
SELECT is(pgbus.retry_delay(2147483647, interval '1 hour', interval '1 day', 0), interval '1 day',
          'retry_delay: the largest attempt with a 1 h base is the cap');
SELECT is(pg_temp.eval($$SELECT pgbus.retry_delay(40, make_interval(secs => 86400), make_interval(secs => 604800), 0)
                            = interval '7 days'$$), 'true',
          'retry_delay: many attempts with a 1-day base (as job_failed builds it) is the cap, no overflow');
SELECT is(pg_temp.eval($$SELECT pgbus.retry_delay(31, interval '3 hours', interval '1 day', 0.1)
                            BETWEEN interval '21.6 hours' AND interval '1 day'$$), 'true',
          'retry_delay: attempt 31 with a 3-hour base is within jitter of the cap, no overflow');
SELECT ok((SELECT bool_and(d BETWEEN interval '30 minutes' AND interval '1 hour')
           FROM (SELECT pgbus.retry_delay(2147483647, interval '1 second', interval '1 hour', 0.5) AS d
                 FROM generate_series(1, 200)) s),
          'retry_delay: the largest attempt with jitter stays within [cap x (1 - jitter), cap]');

-- Jitter spreads around the exponential value, both ways, within +/- jitter.
CREATE TEMP TABLE t_jitter AS
    SELECT pgbus.retry_delay(3, interval '10 seconds', interval '1 hour', 0.25) AS d FROM generate_series(1, 500);
SELECT ok((SELECT bool_and(d BETWEEN interval '30 seconds' AND interval '50 seconds') FROM t_jitter),
          'retry_delay: with jitter 0.25 every delay is within 40 s +/- 25%');
SELECT ok((SELECT min(d) < interval '40 seconds' AND max(d) > interval '40 seconds' FROM t_jitter),
          'retry_delay: jitter spreads delays below and above the exponential value');
SELECT ok((SELECT count(DISTINCT d) > 1 FROM t_jitter), 'retry_delay: jittered delays differ');
SELECT ok((SELECT bool_and(d BETWEEN interval '30 seconds' AND interval '60 seconds')
           FROM (SELECT pgbus.retry_delay(10, interval '10 seconds', interval '60 seconds', 0.5) AS d
                 FROM generate_series(1, 200)) s),
          'retry_delay: with jitter the delay never exceeds cap');
SELECT ok((SELECT bool_and(d >= interval '0')
           FROM (SELECT pgbus.retry_delay(2, interval '10 seconds', interval '1 hour', 3) AS d
                 FROM generate_series(1, 200)) s),
          'retry_delay: never negative, even with a jitter above 1');

SELECT * FROM finish();
ROLLBACK;
