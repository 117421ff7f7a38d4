-- pgTAP tests for sql/functions/600_events.sql: check_routing_key, check_topic_pattern,
-- event_envelope, publish, subscribe, unsubscribe.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(26);

SELECT has_function('pgbus', 'publish', ARRAY['text', 'jsonb', 'jsonb', 'integer'], 'publish exists');
SELECT has_function('pgbus', 'subscribe', ARRAY['text', 'text'], 'subscribe exists');
SELECT has_table('pgbus', 'processed_events', 'processed_events exists');

-- keys and patterns
SELECT lives_ok($$SELECT pgbus.check_routing_key('orders.created')$$, 'a plain key is accepted');
SELECT throws_ok($$SELECT pgbus.check_routing_key('orders..created')$$, '22023', NULL,
                 'a key with an empty segment is refused as invalid_parameter_value');
SELECT throws_ok($$SELECT pgbus.check_routing_key('orders.*')$$, '22023', NULL, 'a key with a wildcard is refused');
SELECT throws_ok($$SELECT pgbus.check_routing_key(NULL)$$, '22023', NULL, 'a NULL key is refused');
SELECT throws_like($$SELECT pgbus.check_routing_key('a b')$$, 'pgbus: invalid routing key ''a b''%',
                   'the refusal names the key');
SELECT lives_ok($$SELECT pgbus.check_topic_pattern('orders.#')$$, 'a # pattern is accepted');
SELECT throws_ok($$SELECT pgbus.check_topic_pattern('orders.**')$$, '22023', NULL, 'a ** pattern is refused');

-- subscribe: queue plus binding, idempotent
SELECT is(pgbus.subscribe('t_orders.*', 't_ev_one'), true, 'subscribe binds a new pattern');
SELECT is(pgbus.subscribe('t_orders.*', 't_ev_one'), false, 'subscribing again changes nothing');
SELECT is((SELECT count(*)::int FROM pgmq.topic_bindings WHERE queue_name = 't_ev_one'), 1, 'one binding');
SELECT ok(EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_ev_one'), 'subscribe created the queue');
SELECT throws_ok($$SELECT pgbus.subscribe('t_orders.*', 'Bad Queue')$$, '22023', NULL, 'a bad queue name is refused');
SELECT throws_ok($$SELECT pgbus.subscribe('t_orders..x', 't_ev_one')$$, '22023', NULL, 'a bad pattern is refused');
SELECT pgbus.subscribe('t_orders.#', 't_ev_all');
SELECT pgbus.subscribe('t_other.created', 't_ev_all');

-- publish: to every matching queue once
SELECT is((SELECT deliveries FROM pgbus.publish('t_orders.created', '{"id": 7}')), 2,
          'an event goes to each queue bound by a matching pattern');
SELECT is((SELECT deliveries FROM pgbus.publish('t_orders.eu.created', '{"id": 8}')), 1,
          '* matches one segment, # several');
SELECT is((SELECT deliveries FROM pgbus.publish('t_nobody.listens', '{"id": 9}')), 0,
          'a key nobody is bound to answers 0 deliveries');
SELECT is((SELECT message - 'published_at' - 'event_id' FROM pgmq.q_t_ev_one),
          '{"payload": {"id": 7}, "routing_key": "t_orders.created"}'::jsonb,
          'the envelope holds payload and routing key');
SELECT ok((SELECT (message ->> 'published_at') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' FROM pgmq.q_t_ev_one),
          'published_at is UTC ISO 8601 with microseconds');
SELECT is((SELECT pgbus.event_envelope('k', '[1, 2]') -> 'payload'), '{"value": [1, 2]}'::jsonb,
          'a payload that is not an object is wrapped as {"value": ...}');
SELECT throws_ok($$SELECT * FROM pgbus.publish('t_orders.x', '{}', '[1]')$$, '22023', NULL,
                 'headers that are not an object are refused');
SELECT throws_ok($$SELECT * FROM pgbus.publish('t_orders.x', '{}', NULL, -1)$$, '22023', NULL,
                 'a negative delay is refused');
SELECT is((SELECT count(*)::int FROM pgmq.q_t_ev_one), 1, 'refused publishes sent nothing');

SELECT is(pgbus.unsubscribe('t_orders.*', 't_ev_one'), true, 'unsubscribe removes the binding');

SELECT * FROM finish();
ROLLBACK;
