-- pgTAP tests for pgbus.messages_cursor (sql/functions/402_messages_cursor.sql): the keyset
-- cursor of pgbus.messages_across at a numbered page, over one queue or all, dead letters apart.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(9);

-- Two queues (7 and 5 messages, interleaved in time) and a dead-letter queue of 2; nothing else.
SELECT pgbus.ensure_queue('t_mc_a');
SELECT pgbus.ensure_queue('t_mc_b');
SELECT pgbus.ensure_queue('t_mc_a_dlq');
SELECT count(*) FROM (SELECT pgmq.send(CASE WHEN g % 12 < 7 THEN 't_mc_a' ELSE 't_mc_b' END, jsonb_build_object('g', g))
                      FROM generate_series(1, 12) g) x;
SELECT pgmq.send_batch('t_mc_a_dlq', ARRAY['{}'::jsonb, '{}'::jsonb]);
-- Distinct enqueue times, newest = highest g (in each queue msg_id follows enqueued_at).
UPDATE pgmq.q_t_mc_a SET enqueued_at = now() - (100 - msg_id * 2) * interval '1 second';
UPDATE pgmq.q_t_mc_b SET enqueued_at = now() - (100 - msg_id * 2 - 1) * interval '1 second';
CREATE TEMP VIEW t_list AS
    SELECT row_number() OVER (ORDER BY enqueued_at DESC, queue_name DESC, msg_id DESC) AS k, *
    FROM pgbus.messages_across(false, NULL, page_size => 500);
SELECT is((SELECT count(*)::int FROM t_list), 12, 'the list has the 12 messages');

-- (Other queues of the test database hold no messages, so the list across queues is ours.)
SELECT is(
    (SELECT count(*)::int FROM generate_series(1, 12) AS s(i)
     WHERE (SELECT (c.before_at, c.before_queue, c.before_id) FROM pgbus.messages_cursor(false, NULL, s.i) c)
           IS NOT DISTINCT FROM (SELECT (l.enqueued_at, l.queue_name, l.msg_id) FROM t_list l WHERE l.k = s.i)),
    12,
    'the cursor at skip k is the k-th message of the list across queues');
SELECT is(
    (SELECT array_agg(m.msg_id ORDER BY m.enqueued_at DESC) FROM pgbus.messages_cursor(false, 't_mc_a', 3) c,
            pgbus.messages_across(false, 't_mc_a', c.before_at, c.before_queue, c.before_id, 2) m),
    ARRAY[4, 3]::bigint[], 'one queue: after the cursor at skip 3 come messages 4 and 3 (of 7)');
SELECT is((SELECT before_id FROM pgbus.messages_cursor(false, 't_mc_b', 5)), 1::bigint, 'one queue: skip 5 of 5 is its oldest');
SELECT is((SELECT count(*)::int FROM pgbus.messages_cursor(false, 't_mc_b', 6)), 0, 'past the end: no cursor');
SELECT is((SELECT count(*)::int FROM pgbus.messages_cursor(false, 't_mc_a', 0)), 0, 'skip 0: no cursor');
SELECT is((SELECT before_queue || ':' || before_id FROM pgbus.messages_cursor(true, 't_mc_a_dlq', 2)), 't_mc_a_dlq:1',
          'dead letters: their own list');
SELECT is((SELECT count(*)::int FROM pgbus.messages_cursor(true, 't_mc_a', 1)), 0, 'a live queue is not in the dead-letter list');
SELECT is((SELECT count(*)::int FROM pgbus.messages_cursor(false, 'nope', 1)), 0, 'an unknown queue: no cursor');

SELECT * FROM finish();
ROLLBACK;
