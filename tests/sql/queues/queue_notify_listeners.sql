-- pgTAP tests for sql/functions/010_queues.sql: queue_notify_listeners (a queue's insert
-- notification, throttled like PGMQ's, never waiting for another sender's transaction) and
-- queue_notify_adopt (it takes the place of PGMQ's trigger).
-- (Whether a send waits for another open transaction needs two sessions: tests/py/test_queue_notify.py.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);

CREATE FUNCTION pg_temp.notify_function(tbl text) RETURNS regproc LANGUAGE sql AS $f$
    SELECT t.tgfoid::regproc FROM pg_trigger t
    WHERE t.tgrelid = ('pgmq.' || tbl)::regclass AND t.tgname = 'trigger_notify_queue_insert_listeners'
$f$;
CREATE FUNCTION pg_temp.last_notified(queue text) RETURNS timestamptz LANGUAGE sql AS $f$
    SELECT last_notified_at FROM pgmq.notify_insert_throttle WHERE queue_name = queue
$f$;

-- ensure_queue's queues notify through pgbus's trigger.
SELECT pgbus.ensure_queue('qn_new');
SELECT is(pg_temp.notify_function('q_qn_new'), 'pgbus.queue_notify_listeners'::regproc,
          'a queue ensure_queue creates notifies through pgbus.queue_notify_listeners');
SELECT is((SELECT throttle_interval_ms FROM pgmq.notify_insert_throttle WHERE queue_name = 'qn_new'), 250,
          '... with PGMQ''s throttle row, 250 ms');

-- The first send notifies (its time is recorded), the next ones within the interval do not.
SELECT is(pg_temp.last_notified('qn_new'), to_timestamp(0), 'before any send, it never notified');
SELECT pgbus.queue_send('qn_new', '{}', now());
SELECT cmp_ok(pg_temp.last_notified('qn_new'), '>', now() - interval '1 minute',
              'the first send notified and recorded when');
CREATE TEMP TABLE first_notice AS SELECT pg_temp.last_notified('qn_new') AS at;
SELECT pgmq.send('qn_new', '{}');
SELECT pgbus.queue_send('qn_new', '{}', now());
SELECT is(pg_temp.last_notified('qn_new'), (SELECT at FROM first_notice),
          'sends within the throttle interval (through PGMQ or pgbus) do not notify again');
UPDATE pgmq.notify_insert_throttle SET last_notified_at = clock_timestamp() - interval '1 second'
WHERE queue_name = 'qn_new';
SELECT pgbus.queue_send('qn_new', '{}', now());
SELECT cmp_ok(pg_temp.last_notified('qn_new'), '>', (SELECT at FROM first_notice),
              'once the interval has passed, the next send notifies');

-- Unthrottled (interval 0): every send notifies.
SELECT pgbus.ensure_queue('qn_every');
UPDATE pgmq.notify_insert_throttle SET throttle_interval_ms = 0 WHERE queue_name = 'qn_every';
SELECT pgbus.queue_send('qn_every', '{}', now());
CREATE TEMP TABLE every_notice AS SELECT pg_temp.last_notified('qn_every') AS at;
SELECT pg_sleep(0.01);
SELECT pgbus.queue_send('qn_every', '{}', now());
SELECT cmp_ok(pg_temp.last_notified('qn_every'), '>', (SELECT at FROM every_notice),
              'with a throttle interval of 0, every send notifies');

-- A queue whose notifications PGMQ set up gets pgbus's trigger from queue_notify_adopt.
SELECT pgmq.create('qn_pgmq');
SELECT pgmq.enable_notify_insert('qn_pgmq', 250);
SELECT pgmq.create('qn_other');
SELECT pgmq.enable_notify_insert('qn_other', 250);
SELECT is(pg_temp.notify_function('q_qn_pgmq'), 'pgmq.notify_queue_listeners'::regproc,
          'pgmq.enable_notify_insert puts PGMQ''s trigger on a queue');
SELECT is(pgbus.queue_notify_adopt(only_queue => 'qn_pgmq'), 1, 'queue_notify_adopt(only_queue) changes that queue''s');
SELECT is(pg_temp.notify_function('q_qn_other'), 'pgmq.notify_queue_listeners'::regproc, '... and no other');
SELECT is(pgbus.queue_notify_adopt(), 1, 'queue_notify_adopt() changes every one left');

-- pgmq.disable_notify_insert still removes it (same trigger name).
SELECT pgmq.disable_notify_insert('qn_pgmq');
SELECT hasnt_trigger('pgmq', 'q_qn_pgmq', 'trigger_notify_queue_insert_listeners',
                     'pgmq.disable_notify_insert removes pgbus''s trigger');

SELECT * FROM finish();
ROLLBACK;
