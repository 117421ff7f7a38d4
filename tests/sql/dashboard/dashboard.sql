-- pgTAP tests for the dashboard's SQL: sql/functions/140_dashboard_reads.sql,
-- 150_operator_actions.sql, 160_health.sql, 170_job_insights.sql, sql/views/110_dashboard_views.sql
-- and the paused-queue rule in pgbus.read_jobs.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT no_plan();

CREATE TEMP TABLE t_ids (name text PRIMARY KEY, id bigint);
CREATE FUNCTION pg_temp.enq(name text, queue text, job_class text DEFAULT 'Mail', batch uuid DEFAULT NULL,
                            kwargs jsonb DEFAULT '{}') RETURNS bigint
LANGUAGE plpgsql AS $f$
DECLARE
    id bigint;
BEGIN
    SELECT e INTO id FROM pgbus.enqueue(queue, job_class,
        ARRAY[jsonb_build_object('args', jsonb_build_array(name), 'kwargs', kwargs)], NULL, batch) e;
    -- Visible now: inside this one transaction now() is its start, before clock_timestamp().
    PERFORM pgmq.set_vt(queue, id, now() - interval '1 second');
    INSERT INTO t_ids VALUES (enq.name, id);
    RETURN id;
END;
$f$;
CREATE FUNCTION pg_temp.id(name text) RETURNS bigint LANGUAGE sql AS $f$ SELECT id FROM t_ids WHERE t_ids.name = $1 $f$;
-- A worker's failed attempt: read (read_ct + 1), then job_failed with 3 retries and 30 s backoff.
CREATE FUNCTION pg_temp.fail(queue text, msg_id bigint) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE format('UPDATE pgmq.%I SET read_ct = read_ct + 1 WHERE msg_id = $1', 'q_' || queue) USING msg_id;
    RETURN pgbus.job_failed(queue, msg_id, '{"class": "ConnectionError", "message": "timed out"}',
                            '{"max_retries": 3, "backoff_base": 30, "backoff_max": 30, "jitter": 0}');
END;
$f$;
CREATE FUNCTION pg_temp.exists_in(queue text, msg_id bigint, kind text DEFAULT 'q') RETURNS boolean
LANGUAGE plpgsql AS $f$
DECLARE
    found boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgmq.%I WHERE msg_id = $1)', kind || '_' || queue)
        INTO found USING msg_id;
    RETURN found;
END;
$f$;

-------------------------------------------------------------------------------------------------
-- Schema
-------------------------------------------------------------------------------------------------
SELECT has_table('pgbus', 'queue_pauses', 'pgbus.queue_pauses exists');
SELECT has_table('pgbus', 'operator_actions', 'pgbus.operator_actions exists');
SELECT has_column('pgbus', 'job_failures', 'max_attempts', 'job_failures records the attempts allowed');
SELECT has_view('pgbus', 'batch_overview', 'pgbus.batch_overview exists');
SELECT has_view('pgbus', 'queue_table_health', 'pgbus.queue_table_health exists');
SELECT has_view('pgbus', 'oldest_transaction', 'pgbus.oldest_transaction exists');
SELECT has_view('pgbus', 'workflow_status_counts', 'pgbus.workflow_status_counts exists');

-------------------------------------------------------------------------------------------------
-- Wording helpers
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.human_duration(40), '40 s', 'seconds');
SELECT is(pgbus.human_duration(180), '3 min', 'minutes');
SELECT is(pgbus.human_duration(7200), '2 h', 'hours');
SELECT is(pgbus.human_duration(5 * 86400), '5 d', 'days');
SELECT is(pgbus.human_duration(NULL), NULL, 'NULL stays NULL');
SELECT is(pgbus.name_list(ARRAY['a', 'b']), 'a, b', 'a short list is all names');
SELECT is(pgbus.name_list(ARRAY(SELECT 'q' || g FROM generate_series(1, 12) g)),
          'q1, q2, q3, q4, q5, q6, q7, q8, q9, q10 (+2 more)', 'ten names then (+N more)');

SELECT is(pgbus.job_next_step(3, now() + interval '40 seconds', 4, 'ConnectionError', false, true),
          'Attempt 3 of 4 failed: ConnectionError — next attempt in 40 s', 'a failed job waiting for its retry');
SELECT is(pgbus.job_next_step(1, now() - interval '1 second', NULL, NULL, true, true),
          'Queue paused', 'a job in a paused queue');
SELECT is(pgbus.job_next_step(0, now() - interval '1 second', NULL, NULL, false, false),
          'No worker drains this queue', 'a job no worker reads');
SELECT is(pgbus.job_next_step(0, now() - interval '1 second', NULL, NULL, false, true),
          'Waiting for a worker', 'a job waiting its turn');
SELECT is(pgbus.job_next_step(0, now() + interval '3 minutes', NULL, NULL, false, true),
          'Scheduled: runs in 3 min', 'a scheduled job');
SELECT is(pgbus.job_next_step(2, now() + interval '20 seconds', NULL, NULL, false, true),
          'Running (attempt 2)', 'a job being run');

-------------------------------------------------------------------------------------------------
-- Reads
-------------------------------------------------------------------------------------------------
SELECT pg_temp.enq('a', 'dash_q');
SELECT pg_temp.enq('b', 'dash_q');
SELECT pg_temp.enq('c', 'dash_q');
SELECT pgmq.set_vt('dash_q', pg_temp.id('c'), now() + interval '1 hour');

SELECT is((SELECT (depth, visible, scheduled, invisible, visible_unread, paused, drained, is_dlq)::text
           FROM pgbus.queue_stats('dash_q')), '(3,2,1,0,2,f,f,f)',
          'queue_stats: depth, visible, scheduled, invisible, unread, paused, drained, is_dlq');
SELECT ok((SELECT total_messages >= 3 FROM pgbus.queue_stats('dash_q')), 'queue_stats: total ever sent');
SELECT is((SELECT count(*) FROM pgbus.queue_stats('no_such_queue')), 0::bigint, 'queue_stats: an unknown queue has no row');
SELECT is((SELECT (depth, visible, scheduled, counts_capped)::text FROM pgbus.queue_stats('dash_q', count_limit => 3)),
          '(3,2,1,f)', 'queue_stats: a queue within count_limit is counted exactly');
SELECT is((SELECT (depth, visible, not_visible, scheduled, invisible, max_read_ct, counts_capped)::text
           FROM pgbus.queue_stats('dash_q', count_limit => 1)),
          '(2,2,1,,,,t)', 'queue_stats: above count_limit the counts stop at count_limit + 1, without the split, and say so');
SELECT is((SELECT (depth, visible, not_visible, scheduled, invisible, visible_unread, max_read_ct, counts_capped)::text
           FROM pgbus.queue_stats('dash_q', count_limit => 10)),
          (SELECT (depth, visible, not_visible, scheduled, invisible, visible_unread, max_read_ct, counts_capped)::text
           FROM pgbus.queue_stats('dash_q')), 'queue_stats: within count_limit the figures equal the exact ones');
SELECT is((SELECT count(*) FROM jsonb_array_elements(pgbus.queue_figures())), (SELECT count(*) FROM pgbus.queue_stats()),
          'queue_figures: every queue as JSON');
SELECT is(pgbus.dashboard_summary(queue_figures => '[]') ->> 'queues', '0', 'dashboard_summary reads the figures it is given');
SELECT ok((SELECT oldest_age_seconds IS NOT NULL AND oldest_claimable_age_seconds IS NOT NULL
           FROM pgbus.queue_stats('dash_q', count_limit => 1)), 'queue_stats: ages come from the indexes when capped');
SELECT is((pgbus.dashboard_summary(count_limit => 1) ->> 'estimated'), 'true', 'dashboard_summary says when counts are estimates');

INSERT INTO pgbus.processes (kind, hostname, pid, metadata) VALUES ('worker', 'h1', 1, '{"queues": ["dash_q"], "jobs_processed": 60}');
SELECT is(pgbus.drained_queues(), ARRAY['dash_q'], 'drained_queues: the queues a live worker reads');
SELECT ok((SELECT drained FROM pgbus.queue_stats('dash_q')), 'queue_stats: drained when a live worker reads it');
SELECT is((SELECT status FROM pgbus.process_status() WHERE hostname = 'h1'), 'healthy', 'process_status: a fresh heartbeat is healthy');
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '1 minute' WHERE hostname = 'h1';
SELECT is((SELECT status FROM pgbus.process_status() WHERE hostname = 'h1'), 'stalled', 'process_status: silent for a minute is stalled');
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '10 minutes' WHERE hostname = 'h1';
SELECT is((SELECT status FROM pgbus.process_status() WHERE hostname = 'h1'), 'stale', 'process_status: silent for 10 minutes is stale');
SELECT is(pgbus.drained_queues(), '{}'::text[], 'a stale worker drains nothing');
DELETE FROM pgbus.processes WHERE hostname = 'h1';

SELECT is(ARRAY(SELECT msg_id FROM pgbus.queue_messages('dash_q', NULL, 2)),
          ARRAY[pg_temp.id('c'), pg_temp.id('b')], 'queue_messages: newest first, page size');
SELECT is(ARRAY(SELECT msg_id FROM pgbus.queue_messages('dash_q', pg_temp.id('b'), 2)),
          ARRAY[pg_temp.id('a')], 'queue_messages: after the keyset cursor');
SELECT is((SELECT count(*) FROM pgbus.queue_messages('no_such_queue')), 0::bigint, 'queue_messages: unknown queue, no rows');
SELECT is((SELECT next_step FROM pgbus.queue_messages('dash_q') WHERE msg_id = pg_temp.id('a')),
          'No worker drains this queue', 'queue_messages: says what happens next');

SELECT is(pg_temp.fail('dash_q', pg_temp.id('a')), 'retry', 'a failure to list');
SELECT is((SELECT max_attempts FROM pgbus.job_failures WHERE msg_id = pg_temp.id('a') AND queue_name = 'dash_q'), 4,
          'job_failed records max_attempts = max_retries + 1');
SELECT alike((SELECT next_step FROM pgbus.failed_jobs('dash_q')), 'Attempt 1 of 4 failed: ConnectionError — next attempt in 3_ s',
            'failed_jobs: the sentence');
SELECT is((SELECT count(*) FROM pgbus.failed_jobs('dash_q', now() - interval '1 day', 'dash_q', 0)), 0::bigint,
          'failed_jobs: nothing older than the cursor');
SELECT is((SELECT queue_name || ':' || msg_id FROM pgbus.queue_message('dash_q', pg_temp.id('a'))) , 'dash_q:' || pg_temp.id('a'),
          'queue_message: one message');
SELECT is((SELECT error_class FROM pgbus.queue_message('dash_q', pg_temp.id('a'))), 'ConnectionError', 'queue_message: with its failure');
SELECT is((SELECT count(*) FROM pgbus.queue_message('dash_q', 999999)), 0::bigint, 'queue_message: a missing message has no row');

SELECT pg_temp.enq('d', 'dash_r');
SELECT is((SELECT count(*) FROM pgbus.messages_across(false) WHERE queue_name IN ('dash_q', 'dash_r')), 4::bigint,
          'messages_across: every non-dead-letter queue');
SELECT is((SELECT count(*) FROM pgbus.messages_across(false, 'dash_r')), 1::bigint, 'messages_across: one queue');
SELECT is((SELECT count(*) FROM pgbus.messages_across(true) WHERE queue_name LIKE 'dash%'), 0::bigint, 'messages_across: no dead letters yet');
SELECT is((SELECT count(*) FROM pgbus.messages_across(false, NULL, now() - interval '1 day', 'zzz', 0)), 0::bigint,
          'messages_across: nothing before an old cursor');

SELECT is((pgbus.dashboard_summary() ->> 'failed')::int, 1, 'dashboard_summary: failed jobs');
SELECT ok((pgbus.dashboard_summary() ->> 'enqueued')::int >= 4, 'dashboard_summary: enqueued');

-------------------------------------------------------------------------------------------------
-- Pause and resume; workers pass a paused queue over
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.queue_pause('dash_r', 'deploy', 'dashboard:ann') ->> 'code', 'paused', 'pause answers paused');
SELECT is((SELECT paused_by || '/' || reason FROM pgbus.queue_pauses WHERE queue_name = 'dash_r'), 'dashboard:ann/deploy', 'the pause records who and why');
SELECT is((SELECT actor || ' ' || action || ' ' || (outcome ->> 'ok') FROM pgbus.operator_actions ORDER BY id DESC LIMIT 1),
          'dashboard:ann queue_pause true', 'the audit row names the operator');
SELECT is(pgbus.queue_pause('dash_r', NULL, 'dashboard:bob') ->> 'code', 'already_paused', 'pausing twice is refused');
SELECT is(pgbus.queue_pause('nope_q', NULL, 'dashboard:bob') ->> 'code', 'not_found', 'pausing an unknown queue is refused');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['dash_r'], 30, 10)), 0::bigint, 'read_jobs passes a paused queue over');
SELECT is((SELECT paused FROM pgbus.queue_stats('dash_r')), true, 'queue_stats shows it paused');
SELECT is((SELECT next_step FROM pgbus.queue_messages('dash_r')), 'Queue paused', 'its jobs say the queue is paused');
SELECT is(pgbus.queue_resume('dash_r', 'dashboard:ann') ->> 'code', 'resumed', 'resume answers resumed');
SELECT is(pgbus.queue_resume('dash_r', 'dashboard:ann') ->> 'code', 'not_paused', 'resuming twice is refused');
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['dash_r'], 30, 10)), 1::bigint, 'a resumed queue is read again');
SELECT throws_ok($$SELECT pgbus.queue_pause('dash_r', NULL, ' ')$$, '22023', NULL, 'an action needs an actor');

-------------------------------------------------------------------------------------------------
-- Retry now and discard
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.message_retry('dash_q', pg_temp.id('a'), 'dashboard:ann') ->> 'code', 'retried', 'retry now of a failed job');
SELECT ok((SELECT vt <= clock_timestamp() FROM pgmq.q_dash_q WHERE msg_id = pg_temp.id('a')), 'it is visible now');
UPDATE pgmq.q_dash_q SET vt = now() - interval '1 second' WHERE msg_id = pg_temp.id('a');  -- (now() is this transaction's start)
SELECT is(pgbus.message_retry('dash_q', pg_temp.id('a'), 'dashboard:ann') ->> 'code', 'already_due', 'a visible job is already due');
SELECT is(pgbus.message_retry('dash_q', pg_temp.id('c'), 'dashboard:ann') ->> 'code', 'retried', 'retry now of a scheduled job');
SELECT pgmq.set_vt('dash_q', pg_temp.id('b'), now() + interval '1 minute');
UPDATE pgmq.q_dash_q SET read_ct = 1 WHERE msg_id = pg_temp.id('b');
SELECT is(pgbus.message_retry('dash_q', pg_temp.id('b'), 'dashboard:ann') ->> 'code', 'running', 'a running job is not retried');
SELECT is(pgbus.message_discard('dash_q', pg_temp.id('b'), 'dashboard:ann') ->> 'code', 'running', 'nor discarded');
SELECT is(pgbus.message_discard('dash_q', pg_temp.id('a'), 'dashboard:ann') ->> 'code', 'discarded', 'discard of a failed job');
SELECT ok(NOT pg_temp.exists_in('dash_q', pg_temp.id('a')) AND pg_temp.exists_in('dash_q', pg_temp.id('a'), 'a'),
          'a discarded message is archived');
SELECT is((SELECT count(*) FROM pgbus.job_failures WHERE queue_name = 'dash_q'), 0::bigint, 'its failure row is gone');
SELECT is(pgbus.message_discard('dash_q', pg_temp.id('a'), 'dashboard:bob') ->> 'code', 'gone', 'a second discard is told it is gone');
SELECT is(pgbus.message_retry('dash_q', pg_temp.id('a'), 'dashboard:bob') ->> 'message', 'Not done: the message is no longer in the queue',
          'the refusal says why');
SELECT is(pgbus.message_retry('nope_q', 1, 'dashboard:bob') ->> 'code', 'not_found', 'an unknown queue is refused');

SELECT pg_temp.enq('step', 'dash_q', pgbus.step_job_class());
SELECT is(pgbus.message_discard('dash_q', pg_temp.id('step'), 'dashboard:ann') ->> 'code', 'workflow_step', 'a workflow step is not discarded here');
SELECT is(pgbus.queue_purge('dash_q', 'dashboard:ann') ->> 'code', 'workflow_steps', 'nor purged with its queue');
DELETE FROM pgmq.q_dash_q WHERE msg_id = pg_temp.id('step');

-- Batch members count as discarded.
CREATE TEMP TABLE t_batch AS SELECT pgbus.batch_open('dash batch') AS id;
SELECT pg_temp.enq('m1', 'dash_q', 'Mail', (SELECT id FROM t_batch));
SELECT pg_temp.enq('m2', 'dash_q', 'Mail', (SELECT id FROM t_batch));
SELECT pgbus.batch_close((SELECT id FROM t_batch));
SELECT is(pgbus.message_discard('dash_q', pg_temp.id('m1'), 'dashboard:ann') ->> 'ok', 'true', 'discard a batch member');
SELECT is((SELECT discarded_jobs || '/' || status FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch)), '1/processing',
          'the batch counts it as discarded');
SELECT is((SELECT progress_percent FROM pgbus.batch_overview WHERE batch_id = (SELECT id FROM t_batch)), 50, 'batch_overview: progress');

-- Bulk: counts done, gone and refused.
SELECT is(pgbus.messages_discard(jsonb_build_array(
              jsonb_build_object('queue', 'dash_q', 'msg_id', pg_temp.id('m2')),
              jsonb_build_object('queue', 'dash_q', 'msg_id', pg_temp.id('a')),
              jsonb_build_object('queue', 'dash_q', 'msg_id', pg_temp.id('b'))), 'dashboard:ann')
          - 'message' - 'code' - 'ok', '{"done": 1, "gone": 1, "refused": 1}', 'bulk discard: done, gone, refused');
SELECT is((SELECT status FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch)), 'finished', 'the batch finishes');
SELECT is(pgbus.messages_retry((SELECT jsonb_agg(jsonb_build_object('queue', 'dash_q', 'msg_id', g)) FROM generate_series(1, 1001) g),
                               'dashboard:ann') ->> 'code', 'too_many', 'at most 1000 per press');
SELECT is(pgbus.messages_retry('"x"', 'dashboard:ann') ->> 'code', 'invalid', 'a selection must be a list');

-------------------------------------------------------------------------------------------------
-- Dead letters
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE t_b2 AS SELECT pgbus.batch_open('dash batch 2') AS id;
SELECT pg_temp.enq('p1', 'dash_p', 'Poison', (SELECT id FROM t_b2));
SELECT pg_temp.enq('p2', 'dash_p', 'Poison', (SELECT id FROM t_b2));
SELECT pgbus.batch_close((SELECT id FROM t_b2));
SELECT pgbus.dead_letter('dash_p', pg_temp.id('p1'), '{"class": "ValueError"}');
SELECT pgbus.dead_letter('dash_p', pg_temp.id('p2'), '{"class": "ValueError"}');
INSERT INTO t_ids SELECT 'dl' || row_number() OVER (ORDER BY msg_id), msg_id FROM pgmq.q_dash_p_dlq;
SELECT is((SELECT count(*) FROM pgbus.messages_across(true, 'dash_p_dlq')), 2::bigint, 'messages_across lists dead letters');
SELECT is((SELECT depth FROM pgbus.queue_stats('dash_p_dlq')), 2::bigint, 'queue_stats of a dead-letter queue');
SELECT is((SELECT status FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_b2)), 'finished', 'all members dead: batch finished');

SELECT is(pgbus.dead_letter_retry('dash_p_dlq', pg_temp.id('dl1'), 'dashboard:ann') ->> 'code', 'retried', 'retry a dead letter');
SELECT is((SELECT count(*) FROM pgmq.q_dash_p_dlq), 1::bigint, 'it left the dead-letter queue');
SELECT is((SELECT count(*) FROM pgmq.q_dash_p WHERE message ->> 'job_class' = 'Poison'), 1::bigint, 'and is back on its origin queue');
SELECT ok((SELECT NOT (message ? 'batch_id') FROM pgmq.q_dash_p), 'without its finished batch');
SELECT ok((SELECT headers ? 'pgbus_retried_from' AND NOT headers ? 'pgbus_dead_letter' FROM pgmq.q_dash_p), 'its headers say where it came from');
SELECT is(pgbus.dead_letter_retry('dash_p_dlq', pg_temp.id('dl1'), 'dashboard:bob') ->> 'code', 'gone', 'a second retry is told it is gone');
SELECT is(pgbus.dead_letter_retry('dash_p', pg_temp.id('p1'), 'dashboard:bob') ->> 'code', 'not_found', 'only dead-letter queues');
SELECT is(pgbus.message_retry('dash_p_dlq', pg_temp.id('dl2'), 'dashboard:ann') ->> 'code', 'retried',
          'retry now on a dead-letter queue retries the dead letter');

-- A member of an unfinished batch becomes pending again.
CREATE TEMP TABLE t_b3 AS SELECT pgbus.batch_open('dash batch 3') AS id;
SELECT pg_temp.enq('p3', 'dash_p', 'Poison', (SELECT id FROM t_b3));
SELECT pg_temp.enq('p4', 'dash_p', 'Poison', (SELECT id FROM t_b3));
SELECT pgbus.batch_close((SELECT id FROM t_b3));
SELECT pgbus.dead_letter('dash_p', pg_temp.id('p3'), '{"class": "ValueError"}');
SELECT is(pgbus.dead_letters_retry_all(1000, 'dashboard:ann') ->> 'done', '1', 'retry all dead letters');
SELECT is((SELECT discarded_jobs || '/' || status FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_b3)), '0/processing',
          'its unfinished batch counts it as pending again');
SELECT ok((SELECT bool_and(message ? 'batch_id') FROM pgmq.q_dash_p WHERE message ->> 'batch_id' = (SELECT id FROM t_b3)::text),
          'and it keeps its batch');
SELECT pgbus.dead_letter('dash_p', pg_temp.id('p4'), '{"class": "ValueError"}');
SELECT is(pgbus.dead_letters_discard_all(1000, 'dashboard:ann') ->> 'done', '1', 'discard all dead letters');
SELECT is((SELECT count(*) FROM pgmq.q_dash_p_dlq), 0::bigint, 'none left');

-------------------------------------------------------------------------------------------------
-- Discard all enqueued, purge, delete
-------------------------------------------------------------------------------------------------
SELECT pg_temp.enq('e' || g, 'dash_e') FROM generate_series(1, 5) g;
SELECT pgmq.set_vt('dash_e', pg_temp.id('e5'), now() + interval '1 hour');
SELECT is(pgbus.jobs_discard_enqueued('dash_e', 3, 'dashboard:ann') ->> 'done', '3', 'discard enqueued takes at most the limit');
SELECT is(pgbus.jobs_discard_enqueued('dash_e', 3, 'dashboard:ann') ->> 'done', '1', 'the next press takes the rest that is due');
SELECT is(pgbus.jobs_discard_enqueued('dash_e_dlq', 3, 'dashboard:ann') ->> 'code', 'not_found', 'not on a dead-letter queue');
SELECT is(pgbus.queue_purge('dash_e', 'dashboard:ann') ->> 'removed', '1', 'purge removes what is left');
SELECT is(pgbus.queue_purge('nope_q', 'dashboard:ann') ->> 'code', 'not_found', 'purging an unknown queue is refused');
SELECT pgbus.queue_pause('dash_e', NULL, 'dashboard:ann');
SELECT is(pgbus.queue_delete('dash_e', 'dashboard:ann') ->> 'code', 'deleted', 'delete a queue');
SELECT ok(NOT pgbus.queue_exists('dash_e'), 'it is gone');
SELECT is((SELECT count(*) FROM pgbus.queue_pauses WHERE queue_name = 'dash_e'), 0::bigint, 'with its pause');
SELECT is(pgbus.queue_delete('dash_e', 'dashboard:ann') ->> 'code', 'not_found', 'deleting twice is refused');

-------------------------------------------------------------------------------------------------
-- Health verdict
-------------------------------------------------------------------------------------------------
-- Only this file's queues and processes (the verdict looks at the whole database).
SELECT pgmq.drop_queue(queue_name) FROM pgmq.meta WHERE queue_name NOT IN ('dash_q', 'dash_r', 'dash_p', 'dash_p_dlq');
DELETE FROM pgbus.processes;
DELETE FROM pgmq.q_dash_q; DELETE FROM pgmq.q_dash_r; DELETE FROM pgmq.q_dash_p;
SELECT is(pgbus.health_verdict() ->> 'status', 'OK', 'nothing waiting: OK');
SELECT pg_temp.enq('h1', 'dash_q');
SELECT is(pgbus.health_verdict() -> 'reasons', '["work in queues no worker drains: dash_q"]', 'work nobody drains: DEGRADED with the queue named');
SELECT is(pgbus.health_verdict() ->> 'status', 'DEGRADED', 'DEGRADED');
SELECT pgbus.queue_pause('dash_q', NULL, 'dashboard:ann');
SELECT is(pgbus.health_verdict() -> 'reasons', '["paused queues hold work: dash_q"]', 'a paused queue holding work');
SELECT pgbus.queue_resume('dash_q', 'dashboard:ann');
INSERT INTO pgbus.processes (kind, hostname, pid, metadata) VALUES ('worker', 'h2', 2, '{"queues": ["dash_q"]}');
SELECT is(pgbus.health_verdict() ->> 'status', 'OK', 'a live worker drains it: OK');
UPDATE pgmq.q_dash_q SET vt = now() - interval '5 minutes';
SELECT is(pgbus.health_verdict() ->> 'status', 'STALLED', 'visible, never read for minutes while a worker lives: STALLED');
UPDATE pgmq.q_dash_q SET vt = now() - interval '1 second';
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '1 minute' WHERE hostname = 'h2';
SELECT is(pgbus.health_verdict() ->> 'status', 'STALLED', 'a stalled worker while queues hold work: STALLED');
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '10 minutes' WHERE hostname = 'h2';
SELECT ok(pgbus.health_verdict() ->> 'reasons' LIKE '%1 stale process(es)%', 'a stale process is a reason');
SELECT is((pgbus.health_verdict() -> 'summary' ->> 'queues')::int >= 1, true, 'the verdict carries a summary');

-------------------------------------------------------------------------------------------------
-- Job insights
-------------------------------------------------------------------------------------------------
DELETE FROM pgbus.job_stats;
INSERT INTO pgbus.job_stats (job_class, queue_name, status, duration_ms, enqueue_latency_ms, created_at)
SELECT 'Mail', 'dash_q', CASE WHEN g <= 8 THEN 'success' WHEN g = 9 THEN 'failed' ELSE 'dead_lettered' END,
       g * 10, g * 100, now() - interval '10 minutes'
FROM generate_series(1, 10) g;
INSERT INTO pgbus.job_stats (job_class, queue_name, status, duration_ms, enqueue_latency_ms, created_at)
VALUES ('Mail', 'dash_q', 'success', 1, 1, now() - interval '2 days');
SELECT is(pgbus.job_insights('1h') -> 'status_counts', '{"success": 8, "failed": 1, "dead_lettered": 1}', 'status split over 1 h');
SELECT is((pgbus.job_insights('1h') ->> 'total')::int, 10, 'only the period counts');
SELECT is((pgbus.job_insights('7d') ->> 'total')::int, 11, 'a longer period counts more');
SELECT is(pgbus.job_insights('1h') -> 'latency_ms', '{"p50": 550, "p95": 955}', 'latency p50 and p95');
SELECT is(pgbus.job_insights('1h') -> 'duration_ms', '{"p50": 55, "p95": 95}', 'duration p50 and p95');
SELECT is(jsonb_array_length(pgbus.job_insights('1h') -> 'buckets'), 61, '1 h in minute buckets');
SELECT is((SELECT sum((b ->> 'success')::int + (b ->> 'failed')::int + (b ->> 'dead_lettered')::int)
           FROM jsonb_array_elements(pgbus.job_insights('24h') -> 'buckets') b), 10::bigint, 'the buckets add up');
SELECT is((pgbus.job_insights('30d') ->> 'bucket_seconds')::int, 21600, '30 d in 6 h buckets');
SELECT throws_ok($$SELECT pgbus.job_insights('2y')$$, '22023', NULL, 'an unknown period is an error');

-------------------------------------------------------------------------------------------------
-- Audit log retention
-------------------------------------------------------------------------------------------------
INSERT INTO pgbus.operator_actions (actor, action, outcome, at) VALUES ('dashboard:old', 'queue_pause', '{}', now() - interval '91 days');
SELECT is(pgbus.cleanup_operator_actions(), 1, 'cleanup_operator_actions: rows older than 90 days go');
SELECT ok((SELECT count(*) FROM pgbus.operator_actions) > 0, 'newer rows stay');

SELECT * FROM finish();
ROLLBACK;
