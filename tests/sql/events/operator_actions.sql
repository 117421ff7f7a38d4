-- pgTAP tests for sql/functions/601_event_actions.sql: event_action_refusal, event_replay,
-- event_mark_handled, event_edit_payload, event_reroute.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(22);

SELECT pgbus.subscribe('t_act.#', 't_ev_act');
SELECT pgbus.subscribe('t_act.one', 't_ev_act2');
SELECT deliveries FROM pgbus.publish('t_act.one', '{"n": 1}');
CREATE TEMP TABLE t_first AS
    SELECT msg_id, (message ->> 'event_id')::uuid AS event_id FROM pgmq.q_t_ev_act;
CREATE FUNCTION pg_temp.first_id() RETURNS bigint LANGUAGE sql AS $f$ SELECT msg_id FROM t_first $f$;
CREATE FUNCTION pg_temp.depth(q text) RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE n integer;
BEGIN EXECUTE format('SELECT count(*) FROM pgmq.%I', 'q_' || q) INTO n; RETURN n; END $f$;

-- replay
SELECT is(pgbus.event_replay('t_ev_act', pg_temp.first_id(), 'test') - 'event_id' - 'message',
          '{"ok": true, "code": "replayed", "deliveries": 2}'::jsonb,
          'replay publishes the payload again to every matching subscriber');
SELECT is(pg_temp.depth('t_ev_act'), 2, 'the original stays beside the replayed copy');
SELECT isnt((SELECT count(DISTINCT message ->> 'event_id')::int FROM pgmq.q_t_ev_act), 1,
            'the replay is a new event');
SELECT is((SELECT count(*)::int FROM pgbus.operator_actions WHERE action = 'event_replay' AND actor = 'test'), 1,
          'the action is recorded with its actor');

-- edit payload
SELECT is(pgbus.event_edit_payload('t_ev_act', pg_temp.first_id(), '[1]', 'test') ->> 'code', 'invalid_payload',
          'a payload that is not an object is refused');
SELECT is((SELECT message -> 'payload' FROM pgmq.q_t_ev_act WHERE msg_id = pg_temp.first_id()), '{"n": 1}'::jsonb,
          'and changes nothing');
SELECT is(pgbus.event_edit_payload('t_ev_act', pg_temp.first_id(), '{"n": 2}', 'test') ->> 'code', 'edited',
          'edit payload answers edited');
SELECT is((SELECT message -> 'payload' FROM pgmq.q_t_ev_act WHERE message ->> 'event_id' = (SELECT event_id::text FROM t_first)),
          '{"n": 2}'::jsonb, 'the event keeps its id with the new payload');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.q_t_ev_act WHERE msg_id = pg_temp.first_id()), 'the old message is gone');
SELECT is(pgbus.event_edit_payload('t_ev_act', pg_temp.first_id(), '{"n": 3}', 'test') ->> 'code', 'gone',
          'a second edit of the old message is refused as gone');
UPDATE t_first SET msg_id = (SELECT msg_id FROM pgmq.q_t_ev_act WHERE message ->> 'event_id' = (SELECT event_id::text FROM t_first));

-- running
UPDATE pgmq.q_t_ev_act SET read_ct = 1, vt = now() + interval '1 minute' WHERE msg_id = pg_temp.first_id();
SELECT is(pgbus.event_mark_handled('t_ev_act', pg_temp.first_id(), ARRAY['app:H'], 'test') ->> 'code', 'running',
          'an event a consumer is handling is refused');
UPDATE pgmq.q_t_ev_act SET vt = now() WHERE msg_id = pg_temp.first_id();

-- reroute
SELECT is(pgbus.event_reroute('t_ev_act', pg_temp.first_id(), 'pgbus_default', 'test') ->> 'code', 'not_a_subscriber',
          'reroute only to a subscriber''s queue');
SELECT is(pgbus.event_reroute('t_ev_act', pg_temp.first_id(), 't_ev_act', 'test') ->> 'code', 'same_queue',
          'not to its own queue');
SELECT is(pgbus.event_reroute('t_ev_act', pg_temp.first_id(), 't_ev_act2', 'test') ->> 'code', 'rerouted',
          'reroute answers rerouted');
SELECT is((SELECT count(*)::int FROM pgmq.q_t_ev_act2 WHERE message ->> 'event_id' = (SELECT event_id::text FROM t_first)), 2,
          'the event is in the target queue (beside the copy published to it)');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.q_t_ev_act WHERE msg_id = pg_temp.first_id()), 'and no longer in its own');
UPDATE t_first SET msg_id = (SELECT max(msg_id) FROM pgmq.q_t_ev_act2 WHERE message ->> 'event_id' = (SELECT event_id::text FROM t_first));

-- mark handled
SELECT is(pgbus.event_mark_handled('t_ev_act2', pg_temp.first_id(), ARRAY['app:H', 'app:I'], 'test') ->> 'code', 'handled',
          'mark handled answers handled');
SELECT is((SELECT array_agg(handler ORDER BY handler) FROM pgbus.processed_events
           WHERE event_id = (SELECT event_id FROM t_first) AND completed_at IS NOT NULL),
          ARRAY['app:H', 'app:I'], 'each handler has finished it');
SELECT is((SELECT count(*)::int FROM pgmq.a_t_ev_act2 WHERE msg_id = pg_temp.first_id()), 1, 'the message is archived');

-- refusals
SELECT is(pgbus.event_replay('no_such_queue', 1, 'test') ->> 'code', 'not_found', 'an unknown queue is refused');
SELECT pgmq.send('t_ev_act', '[1, 2]');
SELECT is(pgbus.event_replay('t_ev_act', (SELECT max(msg_id) FROM pgmq.q_t_ev_act), 'test') ->> 'code', 'not_an_event',
          'a message that is not an event is refused');
SELECT throws_ok($$SELECT pgbus.event_replay('t_ev_act', 1, '')$$, '22023', NULL, 'an action needs an actor');

SELECT * FROM finish();
ROLLBACK;
