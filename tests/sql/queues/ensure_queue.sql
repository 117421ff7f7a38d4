-- pgTAP tests for sql/functions/010_queues.sql: ensure_queue.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(26);
\ir ../include/queues_setup.psql
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

SELECT * FROM finish();
ROLLBACK;
