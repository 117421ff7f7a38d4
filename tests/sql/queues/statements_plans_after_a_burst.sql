-- pgTAP tests for sql/functions/005_queue_functions.sql: a session whose plans were made while
-- its queue was empty reads and archives a burst through the indexes, not by walking the queue.
-- (A worker idles on an empty queue: PL/pgSQL keeps the generic plan it made then, when a scan
-- of the one-page table was the cheapest. Until autovacuum next looks at the table, that plan
-- scanned the whole queue, twice per read and once per archive, for every message of a burst.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);

SELECT pgbus.ensure_queue('qp_burst');
-- Idle polls (more than five, so the session keeps a generic plan) and a few archives of an
-- almost empty queue.
SELECT count(*) FROM generate_series(1, 8) g, LATERAL pgbus.queue_read('qp_burst', 30, 1 + 0 * g) r;
SELECT pgbus.queue_send('qp_burst', '{}', now()) FROM generate_series(1, 8);
SELECT count(*) FROM generate_series(1, 8) g, LATERAL pgbus.queue_read('qp_burst', 30, 1 + 0 * g) r;
SELECT pgbus.queue_archive('qp_burst', msg_id) FROM pgmq.q_qp_burst;

-- The burst: 3,000 messages, a few hundred pages.
SELECT count(pgbus.queue_send('qp_burst', jsonb_build_object('n', g, 'pad', repeat('x', 200)), now()))
FROM generate_series(1, 3000) g;
CREATE TEMP TABLE scans_before AS
    SELECT pg_stat_get_xact_numscans('pgmq.q_qp_burst'::regclass) AS seq,
           pg_stat_get_xact_tuples_returned('pgmq.q_qp_burst'::regclass) AS seq_tuples;

CREATE TEMP TABLE burst_read AS
    SELECT r.msg_id FROM generate_series(1, 20) g, LATERAL pgbus.queue_read('qp_burst', 30, 5 + 0 * g) r;
SELECT is((SELECT count(*) FROM burst_read), 100::bigint, 'twenty reads of five take a hundred messages');
SELECT is((SELECT count(DISTINCT msg_id) FROM burst_read), 100::bigint, '... each once');
SELECT is((SELECT min(msg_id) FROM burst_read),
          (SELECT min(msg_id) FROM pgmq.q_qp_burst WHERE message ? 'n'),
          '... the first visible first');
SELECT ok((SELECT bool_and(pgbus.queue_archive('qp_burst', msg_id)) FROM burst_read),
          'archiving them one by one finds each');

SELECT is(pg_stat_get_xact_numscans('pgmq.q_qp_burst'::regclass) - (SELECT seq FROM scans_before), 0::bigint,
          'no read and no archive scanned the queue''s table: the plans made on the empty queue use its indexes');
SELECT cmp_ok(pg_stat_get_xact_tuples_returned('pgmq.q_qp_burst'::regclass) - (SELECT seq_tuples FROM scans_before),
              '=', 0::bigint, '... so no message was read by a scan');

SELECT * FROM finish();
ROLLBACK;
