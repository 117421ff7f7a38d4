-- pgTAP tests for sql/functions/010_queues.sql: read_jobs.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(28);
\ir ../include/queues_setup.psql
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

SELECT * FROM finish();
ROLLBACK;
