-- pgTAP tests for sql/functions/600_events.sql: event_overview, read_events.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(10);

SELECT pgbus.subscribe('t_ov.*', 't_ev_ov');
SELECT pgbus.subscribe('t_ov.#', 't_ev_ov2');
SELECT deliveries FROM pgbus.publish('t_ov.one', '{"n": 1}');
SELECT deliveries FROM pgbus.publish('t_ov.two', '{"n": 2}');
SELECT pgbus.event_dead_letter('t_ev_ov', (SELECT min(msg_id) FROM pgmq.q_t_ev_ov), '{"class": "Boom"}');

SELECT is((SELECT q FROM jsonb_array_elements(pgbus.event_overview() -> 'queues') q WHERE q ->> 'queue' = 't_ev_ov'),
          '{"queue": "t_ev_ov", "pending": 1, "dead": 1, "counts_capped": false}'::jsonb,
          'a bound queue''s pending and dead counts');
SELECT ok(pgbus.event_overview() -> 'subscribers' @> '[{"pattern": "t_ov.*", "queue": "t_ev_ov"}]',
          'subscribers are the bindings');
SELECT is((SELECT d ->> 'error_class' FROM jsonb_array_elements(pgbus.event_overview() -> 'dead') d
           WHERE d ->> 'queue' = 't_ev_ov_dlq'), 'Boom', 'a dead event carries its error class');
SELECT is((SELECT count(*)::int FROM jsonb_array_elements(pgbus.event_overview() -> 'pending') p
           WHERE p ->> 'queue' IN ('t_ev_ov', 't_ev_ov2')), 3, 'the pending events of the bound queues');
SELECT is(jsonb_array_length(pgbus.event_overview(1) -> 'pending'), 1, 'recent limits the lists');
SELECT is((SELECT q ->> 'counts_capped' FROM jsonb_array_elements(pgbus.event_overview(0, 1) -> 'queues') q
           WHERE q ->> 'queue' = 't_ev_ov2'), 'true', 'counts stop at count_limit and say so');
SELECT throws_ok($$SELECT pgbus.event_overview(-1)$$, '22023', NULL, 'a negative recent is refused');

-- read_events: with headers, hidden for vt
SELECT deliveries FROM pgbus.publish('t_ov.three', '{"n": 3}', '{"h": 1}');
SELECT is((SELECT count(*)::int FROM pgbus.read_events(ARRAY['t_ev_ov2', 'no_such_queue'], 30, 10)), 3,
          'read_events reads the queues that exist');
SELECT is((SELECT count(*)::int FROM pgbus.read_events(ARRAY['t_ev_ov2'], 30, 10)), 0, 'read messages are hidden');
SELECT is((SELECT headers FROM pgbus.read_events(ARRAY['t_ev_ov'], 30, 10) WHERE message ->> 'routing_key' = 't_ov.three'),
          '{"h": 1}'::jsonb, 'with their headers');

SELECT * FROM finish();
ROLLBACK;
