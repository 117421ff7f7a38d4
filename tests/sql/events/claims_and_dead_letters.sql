-- pgTAP tests for sql/functions/600_events.sql: event_claim, event_completed,
-- event_dead_letter, cleanup_processed_events.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(16);

-- two-phase claims
SELECT is(pgbus.event_claim('00000000-0000-0000-0000-000000000001', 'H'), true, 'a fresh claim runs');
SELECT is(pgbus.event_claim('00000000-0000-0000-0000-000000000001', 'H'), true,
          'a claim left unfinished (a crashed run) runs again');
SELECT is(pgbus.event_claim('00000000-0000-0000-0000-000000000001', 'Other'), true,
          'another handler claims the same event on its own');
SELECT is(pgbus.event_completed('00000000-0000-0000-0000-000000000001', 'H'), true, 'completing a claim');
SELECT is(pgbus.event_claim('00000000-0000-0000-0000-000000000001', 'H'), false, 'a finished claim is skipped');
SELECT is(pgbus.event_completed('00000000-0000-0000-0000-000000000002', 'H'), false,
          'completing without a claim answers false');
SELECT throws_ok($$SELECT pgbus.event_claim(NULL, 'H')$$, '22023', NULL, 'a claim needs an event id');
SELECT throws_ok($$SELECT pgbus.event_claim('00000000-0000-0000-0000-000000000001', ' ')$$, '22023', NULL,
                 'a claim needs a handler');

-- dead letters
SELECT pgbus.subscribe('t_dl.#', 't_ev_dl');
SELECT deliveries FROM pgbus.publish('t_dl.one', '{"n": 1}');
SELECT deliveries FROM pgbus.publish('t_dl.two', '{"n": 2}');
CREATE TEMP TABLE t_ids AS SELECT msg_id, message ->> 'routing_key' AS k FROM pgmq.q_t_ev_dl;
SELECT pgbus.job_failed('t_ev_dl', (SELECT msg_id FROM t_ids WHERE k = 't_dl.one'),
                        '{"class": "Boom", "message": "x"}', '{"max_retries": 5, "backoff_base": 0, "backoff_max": 0, "jitter": 0}');
SELECT is((SELECT row(moved, last_error)::text FROM pgbus.event_dead_letter('t_ev_dl',
               (SELECT msg_id FROM t_ids WHERE k = 't_dl.one'), '{"class": "RetriesExhausted"}')),
          '(t,Boom)', 'the move answers the last recorded failure''s class');
SELECT is((SELECT count(*)::int FROM pgbus.job_failures WHERE queue_name = 't_ev_dl'), 0, 'the failure row is cleared');
SELECT is((SELECT message ->> 'routing_key' FROM pgmq.q_t_ev_dl_dlq), 't_dl.one', 'the event is in <queue>_dlq');
SELECT is((SELECT row(moved, last_error)::text FROM pgbus.event_dead_letter('t_ev_dl',
               (SELECT msg_id FROM t_ids WHERE k = 't_dl.two'), '{"class": "RetriesExhausted"}')),
          '(t,)', 'no recorded failure: last_error is NULL');
SELECT is((SELECT row(moved, last_error)::text FROM pgbus.event_dead_letter('t_ev_dl',
               (SELECT msg_id FROM t_ids WHERE k = 't_dl.two'), '{"class": "RetriesExhausted"}')),
          '(f,)', 'a message already gone does not move');
SELECT is((SELECT array_agg(job_class || ' ' || status ORDER BY id) FROM pgbus.job_stats WHERE queue_name = 't_ev_dl'),
          ARRAY['event:t_dl.one failed', 'event:t_dl.one dead_lettered', 'event:t_dl.two dead_lettered'],
          'stats name an event by its routing key');

-- cleanup
UPDATE pgbus.processed_events SET claimed_at = now() - interval '8 days' WHERE handler = 'H';
SELECT is(pgbus.cleanup_processed_events(interval '7 days'), 1, 'cleanup forgets old claims');
SELECT is((SELECT count(*)::int FROM pgbus.processed_events), 1, 'and keeps recent ones');

SELECT * FROM finish();
ROLLBACK;
