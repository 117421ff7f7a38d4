-- pgTAP tests for sql/functions/140_dashboard_reads.sql: queue_stats on a queue the statistics
-- call big (index probes only), and its reuse of recent capped figures (reuse_within,
-- pgbus.queue_figures_cache from migration 0015).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(10);

SELECT pgmq.create('qfc_q');
SELECT pgmq.send('qfc_q', jsonb_build_object('n', i)) FROM generate_series(1, 5) i;
SELECT pgmq.send('qfc_q', '{"later": true}', now() + interval '1 hour');
UPDATE pgmq.q_qfc_q SET vt = now() - interval '1 second' WHERE message ? 'n';  -- (visible in this transaction)
ANALYZE pgmq.q_qfc_q;  -- (the statistics now call it a six-message queue)

SELECT is((SELECT (depth, visible, not_visible, scheduled, invisible, max_read_ct, counts_capped)::text
           FROM pgbus.queue_stats('qfc_q', count_limit => 2)),
          '(6,3,1,,,,t)', 'big queue: the estimate as depth, probes stop at count_limit + 1, no split, says so');
SELECT ok((SELECT counted_at IS NOT NULL AND oldest_age_seconds IS NOT NULL AND oldest_claimable_age_seconds IS NOT NULL
           AND total_messages = 6 FROM pgbus.queue_stats('qfc_q', count_limit => 2)),
          'big queue: ages and total ever sent from the indexes, counted_at set');
SELECT is((SELECT (visible, not_visible, counts_capped, counted_at)::text FROM pgbus.queue_stats('qfc_q')),
          '(5,1,f,)', 'exact: no counted_at');
SELECT is_empty('SELECT 1 FROM pgbus.queue_figures_cache', 'without reuse_within nothing is stored');

-- Counted with reuse_within: stored; counted again within it: the stored figures come back.
CREATE TEMP TABLE t_first AS SELECT * FROM pgbus.queue_stats('qfc_q', count_limit => 2, reuse_within => interval '1 hour');
SELECT is((SELECT (visible, total_messages)::text FROM pgbus.queue_figures_cache WHERE queue_name = 'qfc_q'),
          '(3,6)', 'reuse_within: the capped figures are stored');
SELECT pgmq.send('qfc_q', jsonb_build_object('n', i)) FROM generate_series(6, 9) i;
SELECT is((SELECT (total_messages, counted_at)::text FROM pgbus.queue_stats('qfc_q', count_limit => 2, reuse_within => interval '1 hour')),
          (SELECT (total_messages, counted_at)::text FROM t_first), 'reuse_within: recent figures are reused, with when they were counted');
SELECT is((SELECT total_messages FROM pgbus.queue_stats('qfc_q', count_limit => 2, reuse_within => interval '0')), 10::bigint,
          'reuse_within: older figures are counted again');
SELECT is((SELECT total_messages FROM pgbus.queue_figures_cache WHERE queue_name = 'qfc_q'), 10::bigint,
          'reuse_within: and stored again');
SELECT is((SELECT total_messages FROM pgbus.queue_stats('qfc_q', count_limit => 2)), 10::bigint,
          'without reuse_within the figures are counted now');
-- A queue the statistics call big that holds fewer messages now is counted exactly.
SELECT pgmq.purge_queue('qfc_q');
SELECT is((SELECT (depth, counts_capped, counted_at)::text FROM pgbus.queue_stats('qfc_q', count_limit => 2, reuse_within => interval '0')),
          '(0,f,)', 'a purged queue the statistics still call big is counted exactly');

SELECT * FROM finish();
ROLLBACK;
