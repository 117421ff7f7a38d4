-- pgTAP tests for sql/functions/030_job_outcomes.sql: job_succeeded; jobs_succeeded: bulk success of one queue's messages; dead_letter; job_failed: retry, retry, dead letter, gone.
-- (Split from job_outcomes.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(212);
\ir ../include/job_outcomes_setup.psql
-------------------------------------------------------------------------------------------------
-- job_succeeded
-------------------------------------------------------------------------------------------------
SELECT isnt(pg_temp.enq('ok1', 't_outcomes_ok', 'Ok'), NULL, 'job_succeeded setup: a job enqueued');
INSERT INTO t_msg SELECT 'ok1', (pg_temp.msg('t_outcomes_ok', pg_temp.id('ok1'))).message;
SELECT is(pg_temp.read1('t_outcomes_ok'), pg_temp.id('ok1'), 'job_succeeded setup: the job read');
SELECT is(pgbus.job_succeeded('t_outcomes_ok', pg_temp.id('ok1'), 120, 45), true, 'job_succeeded: true for a message that is there');
SELECT ok(pg_temp.msg('t_outcomes_ok', pg_temp.id('ok1')) IS NULL, 'job_succeeded: the message left the queue');
SELECT is((pg_temp.msg('t_outcomes_ok', pg_temp.id('ok1'), 'a')).message, (SELECT message FROM t_msg WHERE name = 'ok1'),
          'job_succeeded: the message is archived with its body');
SELECT is(pg_temp.stats('t_outcomes_ok'), 'Ok success 120 45 0',
          'job_succeeded: one success stat with duration, latency and 0 retries');
SELECT is(pgbus.job_succeeded('t_outcomes_ok', pg_temp.id('ok1'), 120, 45), false,
          'job_succeeded: false when the message is already gone');
SELECT is((SELECT count(*) FROM pgmq.a_t_outcomes_ok), 1::bigint, 'job_succeeded: a gone message is not archived again');
SELECT is(pg_temp.stats('t_outcomes_ok'), 'Ok success 120 45 0', 'job_succeeded: a gone message records no stat');
SELECT is(pgbus.job_succeeded('t_outcomes_ok', 999999), false, 'job_succeeded: false for an id that never existed');

-- Defaults and record_stats => false.
SELECT isnt(pg_temp.enq('ok2', 't_outcomes_ok', 'Ok'), NULL, 'job_succeeded setup: a second job enqueued');
SELECT is(pg_temp.read1('t_outcomes_ok'), pg_temp.id('ok2'), 'job_succeeded setup: the second job read');
SELECT is(pgbus.job_succeeded('t_outcomes_ok', pg_temp.id('ok2')), true, 'job_succeeded: with default duration and latency');
SELECT is(pg_temp.stats('t_outcomes_ok'), 'Ok success 120 45 0; Ok success 0 - 0',
          'job_succeeded: defaults record duration 0 and no latency');
SELECT isnt(pg_temp.enq('ok3', 't_outcomes_ok', 'Ok'), NULL, 'job_succeeded setup: a third job enqueued');
SELECT is(pg_temp.read1('t_outcomes_ok'), pg_temp.id('ok3'), 'job_succeeded setup: the third job read');
SELECT is(pgbus.job_succeeded('t_outcomes_ok', pg_temp.id('ok3'), 5, 5, false), true, 'job_succeeded: with record_stats => false');
SELECT ok((pg_temp.msg('t_outcomes_ok', pg_temp.id('ok3'), 'a')).msg_id IS NOT NULL, 'job_succeeded: record_stats => false still archives');
SELECT is((SELECT count(*) FROM pgbus.job_stats WHERE queue_name = 't_outcomes_ok'), 2::bigint,
          'job_succeeded: record_stats => false writes no stat');

-- A message never read (read_ct 0) does not record negative retries.
SELECT isnt(pg_temp.enq('ok0', 't_outcomes_ok0', 'Ok'), NULL, 'job_succeeded setup: an unread job');
SELECT is(pgbus.job_succeeded('t_outcomes_ok0', pg_temp.id('ok0')), true, 'job_succeeded: an unread message succeeds');
SELECT is(pg_temp.stats('t_outcomes_ok0'), 'Ok success 0 - 0', 'job_succeeded: retry_count is never negative');

-- Success after a failure clears the failure record and counts the retry.
SELECT isnt(pg_temp.enq('okr', 't_outcomes_okr', 'Retried'), NULL, 'job_succeeded setup: a job that fails once');
SELECT is(pg_temp.read1('t_outcomes_okr'), pg_temp.id('okr'), 'job_succeeded setup: first attempt read');
SELECT is(pgbus.job_failed('t_outcomes_okr', pg_temp.id('okr'), '{"class": "E", "message": "first"}',
                           '{"max_retries": 3, "backoff_base": 1, "backoff_max": 60, "jitter": 0}'), 'retry',
          'job_succeeded setup: the first attempt failed (retry)');
SELECT is(pg_temp.failures('t_outcomes_okr'), 1::bigint, 'job_succeeded setup: the failure is recorded');
SELECT lives_ok($$SELECT pg_temp.due('t_outcomes_okr', pg_temp.id('okr'))$$, 'job_succeeded setup: the retry is due');
SELECT is(pg_temp.read1('t_outcomes_okr'), pg_temp.id('okr'), 'job_succeeded setup: second attempt read');
SELECT is(pgbus.job_succeeded('t_outcomes_okr', pg_temp.id('okr'), 7), true, 'job_succeeded: the retry succeeds');
SELECT is(pg_temp.failures('t_outcomes_okr'), 0::bigint, 'job_succeeded: success clears the failure record');
SELECT is(pg_temp.stats('t_outcomes_okr'), 'Retried failed 0 - 0; Retried success 7 - 1',
          'job_succeeded: the success stat counts 1 retry (after the failed stat)');

-- Batch members: the counter moves with the archive; the last one finishes the batch.
CREATE TEMP TABLE t_batch (name text PRIMARY KEY, id uuid);
INSERT INTO t_batch VALUES ('ok', pgbus.batch_open('ok', '{"case": "ok"}', '{"job_class": "Done", "queue": "t_outcomes_cb"}',
                                                   '{"job_class": "Fine", "queue": "t_outcomes_cb"}',
                                                   '{"job_class": "Lost", "queue": "t_outcomes_cb"}'));
SELECT isnt(pg_temp.enq('bm1', 't_outcomes_bm', 'Member', (SELECT id FROM t_batch WHERE name = 'ok')), NULL,
            'job_succeeded setup: first batch member');
SELECT isnt(pg_temp.enq('bm2', 't_outcomes_bm', 'Member', (SELECT id FROM t_batch WHERE name = 'ok')), NULL,
            'job_succeeded setup: second batch member');
SELECT is(pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'ok')), false, 'job_succeeded setup: batch closed');
SELECT is(pg_temp.read1('t_outcomes_bm'), pg_temp.id('bm1'), 'job_succeeded setup: first member read');
SELECT is(pg_temp.read1('t_outcomes_bm'), pg_temp.id('bm2'), 'job_succeeded setup: second member read');
SELECT is(pgbus.job_succeeded('t_outcomes_bm', pg_temp.id('bm1')), true, 'job_succeeded: first member succeeds');
SELECT is((SELECT format('%s/%s %s', completed_jobs, total_jobs, status) FROM pgbus.batches
           WHERE batch_id = (SELECT id FROM t_batch WHERE name = 'ok')), '1/2 processing',
          'job_succeeded: counts the member as completed');
SELECT is(pgbus.job_succeeded('t_outcomes_bm', pg_temp.id('bm1')), false, 'job_succeeded: the same member again is gone (false)');
SELECT is((SELECT completed_jobs FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch WHERE name = 'ok')), 1,
          'job_succeeded: a gone member does not count twice');
SELECT is(pgbus.job_succeeded('t_outcomes_bm', pg_temp.id('bm2')), true, 'job_succeeded: last member succeeds');
SELECT is((SELECT format('%s/%s %s', completed_jobs, total_jobs, status) FROM pgbus.batches
           WHERE batch_id = (SELECT id FROM t_batch WHERE name = 'ok')), '2/2 finished',
          'job_succeeded: the last member finishes the batch');
SELECT results_eq(
    $$SELECT message ->> 'job_class', message -> 'args' FROM pgmq.q_t_outcomes_cb ORDER BY msg_id$$,
    $$VALUES ('Done'::text, '[{"case": "ok"}]'::jsonb), ('Fine', '[{"case": "ok"}]')$$,
    'job_succeeded: the finished batch sent on_complete and on_success');

-- A member whose batch was cleaned up still succeeds.
INSERT INTO t_batch VALUES ('gone', pgbus.batch_open('gone'));
SELECT isnt(pg_temp.enq('bg', 't_outcomes_bg', 'Member', (SELECT id FROM t_batch WHERE name = 'gone')), NULL,
            'job_succeeded setup: a member of a batch that will be cleaned up');
DELETE FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch WHERE name = 'gone');
SELECT is(pg_temp.read1('t_outcomes_bg'), pg_temp.id('bg'), 'job_succeeded setup: member read');
SELECT is(pgbus.job_succeeded('t_outcomes_bg', pg_temp.id('bg')), true, 'job_succeeded: a member of a batch that is gone succeeds');
SELECT ok((pg_temp.msg('t_outcomes_bg', pg_temp.id('bg'), 'a')).msg_id IS NOT NULL, 'job_succeeded: and is archived');

-- raise_if_gone: true for a message that is there; PB001 for one that is gone (which aborts the
-- caller's transaction, so the job's own writes with it); the default stays false.
SELECT isnt(pg_temp.enq('rg', 't_outcomes_rg', 'Raiser'), NULL, 'job_succeeded setup: a job for raise_if_gone');
SELECT is(pg_temp.read1('t_outcomes_rg'), pg_temp.id('rg'), 'job_succeeded setup: the raise_if_gone job read');
SELECT is(pgbus.job_succeeded('t_outcomes_rg', pg_temp.id('rg'), 3, 4, true, true), true,
          'job_succeeded: raise_if_gone => true is true for a message that is there');
SELECT ok((pg_temp.msg('t_outcomes_rg', pg_temp.id('rg'), 'a')).msg_id IS NOT NULL,
          'job_succeeded: raise_if_gone => true archives the message');
SELECT throws_ok(format('SELECT pgbus.job_succeeded(%L, %s, raise_if_gone => true)', 't_outcomes_rg', pg_temp.id('rg')), 'PB001',
                 format('pgbus: message %s of t_outcomes_rg was finished by another run', pg_temp.id('rg')),
                 'job_succeeded: raise_if_gone => true raises PB001 for a message that is gone');
SELECT throws_ok($$SELECT pgbus.job_succeeded('t_outcomes_rg', 999999, 0, NULL, true, true)$$, 'PB001', NULL,
                 'job_succeeded: raise_if_gone => true raises PB001 for an id that never existed');
CREATE TEMP TABLE t_job_writes (n integer);
SELECT throws_ok(format($q$DO $d$ BEGIN
                               INSERT INTO t_job_writes VALUES (1);
                               PERFORM pgbus.job_succeeded('t_outcomes_rg', %s, raise_if_gone => true);
                           END $d$$q$, pg_temp.id('rg')), 'PB001', NULL,
                 'job_succeeded: PB001 raised in the caller''s transaction');
SELECT is((SELECT count(*) FROM t_job_writes), 0::bigint, 'job_succeeded: PB001 takes the job''s own writes with it');
SELECT is(pg_temp.stats('t_outcomes_rg'), 'Raiser success 3 4 0', 'job_succeeded: a PB001 for a gone message records no stat');
SELECT is((SELECT count(*) FROM pgmq.a_t_outcomes_rg), 1::bigint, 'job_succeeded: a PB001 for a gone message archives nothing');
SELECT is(pgbus.job_succeeded('t_outcomes_rg', pg_temp.id('rg')), false,
          'job_succeeded: by default a gone message is false, not an error');
SELECT is(pgbus.job_succeeded('t_outcomes_rg', pg_temp.id('rg'), raise_if_gone => false), false,
          'job_succeeded: raise_if_gone => false: a gone message is false');

-------------------------------------------------------------------------------------------------
-- jobs_succeeded: bulk success of one queue's messages.
-------------------------------------------------------------------------------------------------
-- Stats of a queue by job class (rows written by one statement have no meaningful id order).
CREATE FUNCTION pg_temp.stats_by_class(queue text) RETURNS text LANGUAGE sql AS $f$
    SELECT coalesce(string_agg(format('%s %s %s %s %s', job_class, status, duration_ms,
                                      coalesce(enqueue_latency_ms::text, '-'), retry_count), '; '
                               ORDER BY job_class, duration_ms, enqueue_latency_ms), '')
    FROM pgbus.job_stats WHERE queue_name = queue
$f$;
CREATE FUNCTION pg_temp.bstate(name text) RETURNS text LANGUAGE sql AS $f$
    SELECT format('%s/%s/%s %s', completed_jobs, discarded_jobs, total_jobs, status)
    FROM pgbus.batches WHERE batch_id = (SELECT id FROM t_batch WHERE t_batch.name = $1)
$f$;

-- Four read jobs of distinct classes (their stats tell them apart); C is on its third attempt.
SELECT isnt(pg_temp.enq('bA', 't_outcomes_bulk', 'A'), NULL, 'jobs_succeeded setup: job A');
SELECT isnt(pg_temp.enq('bB', 't_outcomes_bulk', 'B'), NULL, 'jobs_succeeded setup: job B');
SELECT isnt(pg_temp.enq('bC', 't_outcomes_bulk', 'C'), NULL, 'jobs_succeeded setup: job C');
SELECT isnt(pg_temp.enq('bK', 't_outcomes_bulk', 'Kept'), NULL, 'jobs_succeeded setup: job Kept (left out of the call)');
INSERT INTO t_msg SELECT name, (pg_temp.msg('t_outcomes_bulk', id)).message FROM t_ids WHERE name IN ('bA', 'bB', 'bC');
SELECT results_eq($$SELECT msg_id FROM pgmq.read('t_outcomes_bulk', 30, 10) ORDER BY msg_id$$,
                  $$SELECT id FROM t_ids WHERE name IN ('bA', 'bB', 'bC', 'bK') ORDER BY id$$,
                  'jobs_succeeded setup: the four jobs read');
UPDATE pgmq.q_t_outcomes_bulk SET read_ct = 3 WHERE msg_id = pg_temp.id('bC');
INSERT INTO pgbus.job_failures (queue_name, msg_id, job_class, error_class, error_message, read_ct)
VALUES ('t_outcomes_bulk', pg_temp.id('bB'), 'B', 'E', 'completed now', 1),
       ('t_outcomes_bulk', pg_temp.id('bK'), 'Kept', 'E', 'not in the call', 1),
       ('t_outcomes_bulk', 999999, 'Never', 'E', 'gone id', 1),
       ('t_outcomes_bulk_other', pg_temp.id('bB'), 'B', 'E', 'same id, other queue', 1);

SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s, 999999, %s], ARRAY[30, 10, 99, 20], ARRAY[300, 100, 999, 200], true)',
           't_outcomes_bulk', pg_temp.id('bC'), pg_temp.id('bA'), pg_temp.id('bB')),
    ARRAY[pg_temp.id('bA'), pg_temp.id('bB'), pg_temp.id('bC')],
    'jobs_succeeded: returns the ids it completed, each once; an id that never existed is left out');
SELECT results_eq($$SELECT msg_id FROM pgmq.q_t_outcomes_bulk$$, $$VALUES (pg_temp.id('bK'))$$,
                  'jobs_succeeded: the completed messages left the queue; the one not given stays');
SELECT results_eq(
    $$SELECT a.msg_id, a.message FROM pgmq.a_t_outcomes_bulk a ORDER BY a.msg_id$$,
    $$SELECT t_ids.id, t_msg.message FROM t_ids JOIN t_msg USING (name) WHERE name IN ('bA', 'bB', 'bC') ORDER BY t_ids.id$$,
    'jobs_succeeded: the completed messages are archived with their bodies');
SELECT is(pg_temp.stats_by_class('t_outcomes_bulk'), 'A success 10 100 0; B success 20 200 0; C success 30 300 2',
          'jobs_succeeded: one success stat per completed id, with the duration and latency at its position, retries = read_ct - 1');
SELECT results_eq(
    $$SELECT queue_name, msg_id FROM pgbus.job_failures WHERE queue_name LIKE 't_outcomes_bulk%' ORDER BY 1, 2$$,
    $$VALUES ('t_outcomes_bulk'::text, pg_temp.id('bK')), ('t_outcomes_bulk', 999999::bigint),
             ('t_outcomes_bulk_other', pg_temp.id('bB'))$$,
    'jobs_succeeded: deletes the failure records of the completed ids only (not others, not other queues, not gone ids)');

-- Ids already gone: left out of the answer, nothing done for them.
SELECT is_empty(format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s, 999999], ARRAY[1, 2, 3], ARRAY[1, 2, 3])',
                       't_outcomes_bulk', pg_temp.id('bA'), pg_temp.id('bC')),
                'jobs_succeeded: only ids already gone returns nothing');
SELECT is((SELECT count(*) FROM pgmq.a_t_outcomes_bulk), 3::bigint, 'jobs_succeeded: gone ids are not archived again');
SELECT is(pg_temp.stats_by_class('t_outcomes_bulk'), 'A success 10 100 0; B success 20 200 0; C success 30 300 2',
          'jobs_succeeded: gone ids record no stat');
SELECT is((SELECT count(*) FROM pgbus.job_failures WHERE queue_name LIKE 't_outcomes_bulk%'), 3::bigint,
          'jobs_succeeded: gone ids delete no failure record');
SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s], ARRAY[1, 2], ARRAY[11, 22])',
           't_outcomes_bulk', pg_temp.id('bA'), pg_temp.id('bK')),
    ARRAY[pg_temp.id('bK')], 'jobs_succeeded: a gone id and one that is there: only the one that is there is returned');
SELECT is(pg_temp.stats_by_class('t_outcomes_bulk'), 'A success 10 100 0; B success 20 200 0; C success 30 300 2; Kept success 2 22 0',
          'jobs_succeeded: the stat takes the numbers at the id''s own position, after a gone id');
SELECT results_eq(
    $$SELECT queue_name, msg_id FROM pgbus.job_failures WHERE queue_name LIKE 't_outcomes_bulk%' ORDER BY 1, 2$$,
    $$VALUES ('t_outcomes_bulk'::text, 999999::bigint), ('t_outcomes_bulk_other', pg_temp.id('bB'))$$,
    'jobs_succeeded: the completed id''s failure record is deleted');

-- Duplicate ids complete once (one archive row, one stat, one batch count).
INSERT INTO t_batch VALUES ('dup', pgbus.batch_open('dup', '{"case": "dup"}', '{"job_class": "Done", "queue": "t_outcomes_dcb"}'));
SELECT isnt(pg_temp.enq('d1', 't_outcomes_dup', 'D1', (SELECT id FROM t_batch WHERE name = 'dup')), NULL, 'jobs_succeeded setup: member d1');
SELECT isnt(pg_temp.enq('d2', 't_outcomes_dup', 'D2', (SELECT id FROM t_batch WHERE name = 'dup')), NULL, 'jobs_succeeded setup: member d2');
SELECT isnt(pg_temp.enq('d3', 't_outcomes_dup', 'D3', (SELECT id FROM t_batch WHERE name = 'dup')), NULL, 'jobs_succeeded setup: member d3');
SELECT is(pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'dup')), false, 'jobs_succeeded setup: batch dup closed');
SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s, %s, %s], ARRAY[5, 5, 6, 5], ARRAY[50, 50, 60, 50])',
           't_outcomes_dup', pg_temp.id('d1'), pg_temp.id('d1'), pg_temp.id('d2'), pg_temp.id('d1')),
    ARRAY[pg_temp.id('d1'), pg_temp.id('d2')], 'jobs_succeeded: duplicate ids are returned once');
SELECT is((SELECT count(*) FROM pgmq.a_t_outcomes_dup), 2::bigint, 'jobs_succeeded: duplicate ids are archived once');
SELECT is(pg_temp.stats_by_class('t_outcomes_dup'), 'D1 success 5 50 0; D2 success 6 60 0',
          'jobs_succeeded: duplicate ids record one stat each');
SELECT is(pg_temp.bstate('dup'), '2/0/3 processing', 'jobs_succeeded: duplicate ids count once in their batch');
SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s])', 't_outcomes_dup', pg_temp.id('d3'), pg_temp.id('d3')),
    ARRAY[pg_temp.id('d3')], 'jobs_succeeded: the last member, given twice, is returned once');
SELECT is(pg_temp.bstate('dup'), '3/0/3 finished', 'jobs_succeeded: the last member given twice finishes the batch');
SELECT is((SELECT count(*) FROM pgmq.q_t_outcomes_dcb WHERE message ->> 'job_class' = 'Done'), 1::bigint,
          'jobs_succeeded: the batch given a duplicate last member sends on_complete once');

-- An empty array returns nothing and does nothing.
CREATE TEMP TABLE t_count AS SELECT count(*) AS n FROM pgbus.job_stats;
SELECT is_empty($$SELECT * FROM pgbus.jobs_succeeded('t_outcomes_dup', '{}')$$, 'jobs_succeeded: an empty array returns nothing');
SELECT is_empty($$SELECT * FROM pgbus.jobs_succeeded('t_outcomes_dup', '{}', '{}', '{}', true)$$,
                'jobs_succeeded: empty arrays everywhere return nothing');
SELECT is((SELECT count(*) FROM pgbus.job_stats), (SELECT n FROM t_count), 'jobs_succeeded: an empty array records no stat');

-- record_stats => false: archives, counts and clears failures, writes no stat.
INSERT INTO t_batch VALUES ('quiet', pgbus.batch_open('quiet'));
SELECT isnt(pg_temp.enq('qu1', 't_outcomes_bquiet', 'Quiet', (SELECT id FROM t_batch WHERE name = 'quiet')), NULL,
            'jobs_succeeded setup: a quiet batch member');
SELECT isnt(pg_temp.enq('qu2', 't_outcomes_bquiet', 'Quiet'), NULL, 'jobs_succeeded setup: a quiet job');
SELECT is(pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'quiet')), false, 'jobs_succeeded setup: batch quiet closed');
INSERT INTO pgbus.job_failures (queue_name, msg_id, job_class, error_class, error_message, read_ct)
VALUES ('t_outcomes_bquiet', pg_temp.id('qu2'), 'Quiet', 'E', 'earlier', 1);
SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s], ARRAY[1, 2], ARRAY[3, 4], false)',
           't_outcomes_bquiet', pg_temp.id('qu1'), pg_temp.id('qu2')),
    ARRAY[pg_temp.id('qu1'), pg_temp.id('qu2')], 'jobs_succeeded: record_stats => false returns the completed ids');
SELECT is((SELECT count(*) FROM pgmq.a_t_outcomes_bquiet), 2::bigint, 'jobs_succeeded: record_stats => false archives');
SELECT is(pg_temp.stats_by_class('t_outcomes_bquiet'), '', 'jobs_succeeded: record_stats => false writes no stat');
SELECT is(pg_temp.failures('t_outcomes_bquiet'), 0::bigint, 'jobs_succeeded: record_stats => false still clears failure records');
SELECT is(pg_temp.bstate('quiet'), '1/0/1 finished', 'jobs_succeeded: record_stats => false still counts and finishes the batch');

-- NULL duration/latency arrays (and the defaults): duration 0, no latency; retries never negative.
SELECT isnt(pg_temp.enq('n1', 't_outcomes_bnull', 'N1'), NULL, 'jobs_succeeded setup: job N1');
SELECT isnt(pg_temp.enq('n2', 't_outcomes_bnull', 'N2'), NULL, 'jobs_succeeded setup: job N2 (never read)');
SELECT isnt(pg_temp.enq('n3', 't_outcomes_bnull', 'N3'), NULL, 'jobs_succeeded setup: job N3');
SELECT isnt(pg_temp.enq('n4', 't_outcomes_bnull', 'N4'), NULL, 'jobs_succeeded setup: job N4');
SELECT is(pg_temp.read1('t_outcomes_bnull'), pg_temp.id('n1'), 'jobs_succeeded setup: N1 read');
SELECT lives_ok($$SELECT pg_temp.due('t_outcomes_bnull', pg_temp.id('n1'))$$, 'jobs_succeeded setup: N1 visible again');
SELECT is(pg_temp.read1('t_outcomes_bnull'), pg_temp.id('n1'), 'jobs_succeeded setup: N1 read a second time');
SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s, %s], NULL, NULL, true)',
           't_outcomes_bnull', pg_temp.id('n1'), pg_temp.id('n2')),
    ARRAY[pg_temp.id('n1'), pg_temp.id('n2')], 'jobs_succeeded: NULL duration and latency arrays are accepted');
SELECT is(pg_temp.stats_by_class('t_outcomes_bnull'), 'N1 success 0 - 1; N2 success 0 - 0',
          'jobs_succeeded: NULL arrays record duration 0 and no latency; an unread message has 0 retries, not -1');
SELECT bag_eq(format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s])', 't_outcomes_bnull', pg_temp.id('n3')),
              ARRAY[pg_temp.id('n3')], 'jobs_succeeded: with only queue and ids');
SELECT bag_eq(format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s], ARRAY[-5], NULL)', 't_outcomes_bnull', pg_temp.id('n4')),
              ARRAY[pg_temp.id('n4')], 'jobs_succeeded: a negative duration and a NULL latency array');
SELECT is(pg_temp.stats_by_class('t_outcomes_bnull'), 'N1 success 0 - 1; N2 success 0 - 0; N3 success 0 - 0; N4 success 0 - 0',
          'jobs_succeeded: the defaults record duration 0 and no latency; a negative duration becomes 0');

-- Members of several batches in one call: each batch counts its own members and finishes once.
-- P: both members in the call; Q: its only member; R: one of two; S: one dead-lettered before,
-- the other in the call; O: still open, both members in the call; plus a job in no batch.
INSERT INTO t_batch SELECT k, pgbus.batch_open(k, jsonb_build_object('case', k),
                                               '{"job_class": "Done", "queue": "t_outcomes_mcb"}',
                                               '{"job_class": "Fine", "queue": "t_outcomes_mcb"}',
                                               '{"job_class": "Lost", "queue": "t_outcomes_mcb"}')
FROM unnest(ARRAY['P', 'Q', 'R', 'S', 'O']) k;
CREATE FUNCTION pg_temp.benq(name text, batch text) RETURNS bigint LANGUAGE sql AS $f$
    SELECT pg_temp.enq(name, 't_outcomes_multi', 'Member', (SELECT id FROM t_batch WHERE t_batch.name = batch))
$f$;
SELECT lives_ok($$SELECT pgbus.ensure_queue('t_outcomes_mcb')$$, 'jobs_succeeded setup: the callback queue');
CREATE FUNCTION pg_temp.callbacks() RETURNS text LANGUAGE sql AS $f$
    SELECT coalesce(string_agg(format('%s %s', message -> 'args' -> 0 ->> 'case', message ->> 'job_class'), ', '
                               ORDER BY message -> 'args' -> 0 ->> 'case', message ->> 'job_class'), '')
    FROM pgmq.q_t_outcomes_mcb
$f$;
SELECT is(ARRAY[pg_temp.benq('p1', 'P'), pg_temp.benq('q1', 'Q'), pg_temp.benq('r1', 'R'), pg_temp.benq('s1', 'S'),
                pg_temp.benq('o1', 'O'), pg_temp.enq('x', 't_outcomes_multi', 'Plain'), pg_temp.benq('p2', 'P'),
                pg_temp.benq('r2', 'R'), pg_temp.benq('s2', 'S'), pg_temp.benq('o2', 'O')] IS NOT NULL, true,
          'jobs_succeeded setup: members of five batches and a plain job, interleaved');
SELECT is(ARRAY[pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'P')), pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'Q')),
                pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'R')), pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'S'))],
          ARRAY[false, false, false, false], 'jobs_succeeded setup: batches P, Q, R, S closed (O stays open)');
SELECT is((SELECT count(*) FROM pgmq.read('t_outcomes_multi', 30, 20)), 10::bigint, 'jobs_succeeded setup: the ten jobs read');
SELECT is(pgbus.dead_letter('t_outcomes_multi', pg_temp.id('s1'), '{"class": "E"}'), true, 'jobs_succeeded setup: s1 dead-lettered');
SELECT bag_eq(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s])', 't_outcomes_multi',
           (SELECT string_agg(pg_temp.id(n)::text, ', ') FROM unnest(ARRAY['o2', 'p2', 'x', 'q1', 's2', 'r1', 'p1', 'o1']) n)),
    ARRAY(SELECT pg_temp.id(n) FROM unnest(ARRAY['p1', 'p2', 'q1', 'r1', 's2', 'o1', 'o2', 'x']) n),
    'jobs_succeeded: members of several batches and a plain job complete in one call');
SELECT is(ARRAY[pg_temp.bstate('P'), pg_temp.bstate('Q'), pg_temp.bstate('R'), pg_temp.bstate('S'), pg_temp.bstate('O')],
          ARRAY['2/0/2 finished', '1/0/1 finished', '1/0/2 processing', '1/1/2 finished', '2/0/2 open'],
          'jobs_succeeded: each batch counts its own members; those whose sum reached total finished');
SELECT is(pg_temp.callbacks(), 'P Done, P Fine, Q Done, Q Fine, S Done, S Lost',
          'jobs_succeeded: each finished batch sent its callbacks once (S had a discard)');
SELECT is_empty(
    format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s])', 't_outcomes_multi',
           (SELECT string_agg(pg_temp.id(n)::text, ', ') FROM unnest(ARRAY['p1', 'p2', 'q1', 'r1', 's2', 'o1', 'o2', 'x']) n)),
    'jobs_succeeded: the same call again completes nothing');
SELECT is(ARRAY[pg_temp.bstate('P'), pg_temp.bstate('Q'), pg_temp.bstate('R'), pg_temp.bstate('S'), pg_temp.bstate('O')],
          ARRAY['2/0/2 finished', '1/0/1 finished', '1/0/2 processing', '1/1/2 finished', '2/0/2 open'],
          'jobs_succeeded: gone members count nothing more');
SELECT is(pg_temp.callbacks(), 'P Done, P Fine, Q Done, Q Fine, S Done, S Lost', 'jobs_succeeded: no callback is sent twice');
SELECT bag_eq(format('SELECT * FROM pgbus.jobs_succeeded(%L, ARRAY[%s])', 't_outcomes_multi', pg_temp.id('r2')),
              ARRAY[pg_temp.id('r2')], 'jobs_succeeded: the last member of R completes alone');
SELECT is(pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'O')), true, 'jobs_succeeded: O, whose members all completed, finishes at close');
SELECT is(ARRAY[pg_temp.bstate('R'), pg_temp.bstate('O')], ARRAY['2/0/2 finished', '2/0/2 finished'], 'jobs_succeeded: R and O finished');
SELECT is(pg_temp.callbacks(), 'O Done, O Fine, P Done, P Fine, Q Done, Q Fine, R Done, R Fine, S Done, S Lost',
          'jobs_succeeded: R and O sent their callbacks once, the others nothing more');
SELECT is(pg_temp.stats_by_class('t_outcomes_multi'),
          'Member dead_lettered 0 - 0; Member success 0 - 0; Member success 0 - 0; Member success 0 - 0; Member success 0 - 0; '
          'Member success 0 - 0; Member success 0 - 0; Member success 0 - 0; Member success 0 - 0; Plain success 0 - 0',
          'jobs_succeeded: one stat per completed message across the calls');

-------------------------------------------------------------------------------------------------
-- dead_letter
-------------------------------------------------------------------------------------------------
SELECT isnt(pg_temp.enq('dl1', 't_outcomes_dl', 'Doomed'), NULL, 'dead_letter setup: a job enqueued');
INSERT INTO t_msg SELECT 'dl1', (pg_temp.msg('t_outcomes_dl', pg_temp.id('dl1'))).message;
SELECT is(pg_temp.read1('t_outcomes_dl'), pg_temp.id('dl1'), 'dead_letter setup: the job read');
INSERT INTO pgbus.job_failures (queue_name, msg_id, job_class, error_class, error_message, read_ct)
VALUES ('t_outcomes_dl', pg_temp.id('dl1'), 'Doomed', 'E', 'earlier', 1);
SELECT is(pgbus.dead_letter('t_outcomes_dl', pg_temp.id('dl1'), '{"class": "Fatal", "message": "no way"}'), true,
          'dead_letter: true for a message that is there');
SELECT ok(pg_temp.msg('t_outcomes_dl', pg_temp.id('dl1')) IS NULL, 'dead_letter: the message left the queue');
SELECT ok(pg_temp.msg('t_outcomes_dl', pg_temp.id('dl1'), 'a') IS NULL, 'dead_letter: the message is not archived');
SELECT ok(EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_outcomes_dl_dlq'), 'dead_letter: creates <queue>_dlq');
SELECT ok(NOT EXISTS (SELECT 1 FROM pgmq.notify_insert_throttle WHERE queue_name = 't_outcomes_dl_dlq'),
          'dead_letter: the dead-letter queue has no insert notifications');
SELECT is((pg_temp.dl('t_outcomes_dl', pg_temp.id('dl1'))).message, (SELECT message FROM t_msg WHERE name = 'dl1'),
          'dead_letter: the dead letter keeps the message body');
SELECT results_eq(
    $$SELECT h ->> 'queue', (h ->> 'msg_id')::bigint, (h ->> 'read_ct')::integer, h -> 'error',
             (h ->> 'dead_lettered_at')::timestamptz
      FROM (SELECT (pg_temp.dl('t_outcomes_dl', pg_temp.id('dl1'))).headers -> 'pgbus_dead_letter' AS h) s$$,
    $$VALUES ('t_outcomes_dl'::text, pg_temp.id('dl1'), 1, '{"class": "Fatal", "message": "no way"}'::jsonb, now())$$,
    'dead_letter: headers->pgbus_dead_letter holds queue, msg_id, read_ct, error, dead_lettered_at');
SELECT ok((pg_temp.dl('t_outcomes_dl', pg_temp.id('dl1'))).vt <= clock_timestamp(), 'dead_letter: the dead letter is visible');
SELECT is(pg_temp.failures('t_outcomes_dl'), 0::bigint, 'dead_letter: clears the failure record');
SELECT is(pg_temp.stats('t_outcomes_dl'), 'Doomed dead_lettered 0 - 0', 'dead_letter: one dead_lettered stat');
SELECT is(pgbus.dead_letter('t_outcomes_dl', pg_temp.id('dl1'), '{}'), false, 'dead_letter: false when the message is gone');
SELECT is((SELECT count(*) FROM pgmq.q_t_outcomes_dl_dlq), 1::bigint, 'dead_letter: a gone message is not dead-lettered twice');
SELECT is(pg_temp.stats('t_outcomes_dl'), 'Doomed dead_lettered 0 - 0', 'dead_letter: a gone message records no stat');
SELECT is(pgbus.dead_letter('t_outcomes_dl', 999999, '{}'), false, 'dead_letter: false for an id that never existed');

-- Existing headers are kept; record_stats => false writes no stat.
SELECT lives_ok($$SELECT pgbus.ensure_queue('t_outcomes_dlh')$$, 'dead_letter setup: queue for a message with headers');
INSERT INTO t_ids SELECT 'dlh', pgmq.send('t_outcomes_dlh', pgbus.job_envelope('t_outcomes_dlh', 'Traced', '{}', NULL, NULL),
                                          '{"trace_id": "abc"}'::jsonb);
SELECT is(pg_temp.read1('t_outcomes_dlh'), pg_temp.id('dlh'), 'dead_letter setup: the job read');
SELECT is(pgbus.dead_letter('t_outcomes_dlh', pg_temp.id('dlh'), '{"class": "E"}', false), true,
          'dead_letter: record_stats => false dead-letters');
SELECT is((pg_temp.dl('t_outcomes_dlh', pg_temp.id('dlh'))).headers ->> 'trace_id', 'abc',
          'dead_letter: the message''s own headers are kept');
SELECT is((pg_temp.dl('t_outcomes_dlh', pg_temp.id('dlh'))).headers -> 'pgbus_dead_letter' ->> 'queue', 't_outcomes_dlh',
          'dead_letter: and the dead-letter header is added');
SELECT is(pg_temp.stats('t_outcomes_dlh'), '', 'dead_letter: record_stats => false writes no stat');

-- The longest valid queue name (43 characters) can dead-letter too.
SELECT isnt(pg_temp.enq('dl47', repeat('q', 43), 'Long'), NULL, 'dead_letter setup: a job in a queue with a 43-character name');
SELECT is(pg_temp.read1(repeat('q', 43)), pg_temp.id('dl47'), 'dead_letter setup: the job read');
SELECT is(pg_temp.eval(format('SELECT pgbus.dead_letter(%L, %s, %L)', repeat('q', 43), pg_temp.id('dl47'), '{"class": "E"}')),
          'true', 'dead_letter: a message in a queue with a 43-character name can be dead-lettered');

-------------------------------------------------------------------------------------------------
-- job_failed: retry, retry, dead letter, gone.
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE t_policy (name text PRIMARY KEY, policy jsonb);
INSERT INTO t_policy VALUES
    ('two', '{"max_retries": 2, "backoff_base": 10, "backoff_max": 3600, "jitter": 0}'),
    ('none', '{"max_retries": 0, "backoff_base": 10, "backoff_max": 3600, "jitter": 0}'),
    ('capped', '{"max_retries": 100, "backoff_base": 10, "backoff_max": 60, "jitter": 0}'),
    ('jitter', '{"max_retries": 5, "backoff_base": 10, "backoff_max": 3600, "jitter": 0.5}');
CREATE FUNCTION pg_temp.policy(name text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT policy FROM t_policy WHERE t_policy.name = $1
$f$;

SELECT isnt(pg_temp.enq('f', 't_outcomes_f', 'Flaky'), NULL, 'job_failed setup: a job enqueued');
INSERT INTO t_msg SELECT 'f', (pg_temp.msg('t_outcomes_f', pg_temp.id('f'))).message;
SELECT is(pg_temp.read1('t_outcomes_f'), pg_temp.id('f'), 'job_failed setup: attempt 1 read');
SELECT is(pgbus.job_failed('t_outcomes_f', pg_temp.id('f'), '{"class": "Timeout", "message": "took too long", "backtrace": "line 1"}',
                           pg_temp.policy('two'), 250), 'retry',
          'job_failed: read_ct 1 <= max_retries 2 is retry');
SELECT ok((pg_temp.msg('t_outcomes_f', pg_temp.id('f'))).vt BETWEEN now() + interval '10 seconds' AND clock_timestamp() + interval '10 seconds',
          'job_failed: the message is hidden for the backoff (base 10 s on attempt 1)');
SELECT is(pg_temp.read1('t_outcomes_f'), NULL, 'job_failed: a message waiting for its retry is not read');
SELECT results_eq(
    $$SELECT job_class, error_class, error_message, backtrace, read_ct, failed_at
      FROM pgbus.job_failures WHERE queue_name = 't_outcomes_f' AND msg_id = pg_temp.id('f')$$,
    $$VALUES ('Flaky'::text, 'Timeout'::text, 'took too long'::text, 'line 1'::text, 1, now())$$,
    'job_failed: records the failure (class, message, backtrace, read_ct)');
SELECT is(pg_temp.stats('t_outcomes_f'), 'Flaky failed 250 - 0', 'job_failed: a failed stat with the duration and 0 retries');

SELECT lives_ok($$SELECT pg_temp.due('t_outcomes_f', pg_temp.id('f'))$$, 'job_failed setup: the retry is due');
SELECT is(pg_temp.read1('t_outcomes_f'), pg_temp.id('f'), 'job_failed setup: attempt 2 read');
SELECT is(pgbus.job_failed('t_outcomes_f', pg_temp.id('f'), '{"class": "Boom", "message": "again"}', pg_temp.policy('two'), 30),
          'retry', 'job_failed: read_ct 2 <= max_retries 2 is retry');
SELECT ok((pg_temp.msg('t_outcomes_f', pg_temp.id('f'))).vt BETWEEN now() + interval '20 seconds' AND clock_timestamp() + interval '20 seconds',
          'job_failed: the backoff doubles on attempt 2 (20 s)');
SELECT results_eq(
    $$SELECT job_class, error_class, error_message, backtrace, read_ct
      FROM pgbus.job_failures WHERE queue_name = 't_outcomes_f'$$,
    $$VALUES ('Flaky'::text, 'Boom'::text, 'again'::text, NULL::text, 2)$$,
    'job_failed: the failure record is updated in place (one row, latest error, read_ct 2)');
SELECT is(pg_temp.stats('t_outcomes_f'), 'Flaky failed 250 - 0; Flaky failed 30 - 1', 'job_failed: a second failed stat, 1 retry');

SELECT lives_ok($$SELECT pg_temp.due('t_outcomes_f', pg_temp.id('f'))$$, 'job_failed setup: the retry is due again');
SELECT is(pg_temp.read1('t_outcomes_f'), pg_temp.id('f'), 'job_failed setup: attempt 3 read');
SELECT is(pgbus.job_failed('t_outcomes_f', pg_temp.id('f'), '{"class": "Boom", "message": "third"}', pg_temp.policy('two'), 40),
          'dead_lettered', 'job_failed: read_ct 3 > max_retries 2 is dead_lettered');
SELECT ok(pg_temp.msg('t_outcomes_f', pg_temp.id('f')) IS NULL, 'job_failed: the dead-lettered message left the queue');
SELECT is((pg_temp.dl('t_outcomes_f', pg_temp.id('f'))).message, (SELECT message FROM t_msg WHERE name = 'f'),
          'job_failed: the message is in <queue>_dlq with its body');
SELECT results_eq(
    $$SELECT h ->> 'queue', (h ->> 'msg_id')::bigint, (h ->> 'read_ct')::integer, h -> 'error'
      FROM (SELECT (pg_temp.dl('t_outcomes_f', pg_temp.id('f'))).headers -> 'pgbus_dead_letter' AS h) s$$,
    $$VALUES ('t_outcomes_f'::text, pg_temp.id('f'), 3, '{"class": "Boom", "message": "third"}'::jsonb)$$,
    'job_failed: headers->pgbus_dead_letter holds queue, msg_id, read_ct 3 and the error');
SELECT is(pg_temp.failures('t_outcomes_f'), 0::bigint, 'job_failed: dead-lettering clears the failure record');
SELECT is(pg_temp.stats('t_outcomes_f'), 'Flaky failed 250 - 0; Flaky failed 30 - 1; Flaky dead_lettered 0 - 2',
          'job_failed: a dead_lettered stat with 2 retries');
SELECT is(pgbus.job_failed('t_outcomes_f', pg_temp.id('f'), '{}', pg_temp.policy('two')), 'gone',
          'job_failed: gone once the message was dead-lettered');
SELECT is(pgbus.job_failed('t_outcomes_f', 999999, '{}', pg_temp.policy('two')), 'gone', 'job_failed: gone for an id that never existed');
SELECT is(pg_temp.stats('t_outcomes_f'), 'Flaky failed 250 - 0; Flaky failed 30 - 1; Flaky dead_lettered 0 - 2',
          'job_failed: gone records no stat');
SELECT is(pg_temp.failures('t_outcomes_f'), 0::bigint, 'job_failed: gone records no failure');
SELECT is((SELECT count(*) FROM pgmq.q_t_outcomes_f_dlq), 1::bigint, 'job_failed: gone dead-letters nothing more');

-- max_retries 0: the first failure dead-letters.
SELECT isnt(pg_temp.enq('f0', 't_outcomes_f0', 'Once'), NULL, 'job_failed setup: a job with no retries');
SELECT is(pg_temp.read1('t_outcomes_f0'), pg_temp.id('f0'), 'job_failed setup: attempt 1 read');
SELECT is(pgbus.job_failed('t_outcomes_f0', pg_temp.id('f0'), '{"class": "E"}', pg_temp.policy('none')), 'dead_lettered',
          'job_failed: max_retries 0 dead-letters on the first failure');
SELECT isnt((pg_temp.dl('t_outcomes_f0', pg_temp.id('f0'))).msg_id, NULL, 'job_failed: max_retries 0: in the dead-letter queue');
SELECT is(pg_temp.failures('t_outcomes_f0'), 0::bigint, 'job_failed: max_retries 0: no failure record left');

-- Error defaults.
SELECT isnt(pg_temp.enq('fd', 't_outcomes_fd', 'Bare'), NULL, 'job_failed setup: a job failing without error details');
SELECT is(pg_temp.read1('t_outcomes_fd'), pg_temp.id('fd'), 'job_failed setup: read');
SELECT is(pgbus.job_failed('t_outcomes_fd', pg_temp.id('fd'), '{}', pg_temp.policy('two')), 'retry', 'job_failed: retry with an empty error');
SELECT results_eq(
    $$SELECT error_class, error_message, backtrace FROM pgbus.job_failures WHERE queue_name = 't_outcomes_fd'$$,
    $$VALUES ('Error'::text, ''::text, NULL::text)$$,
    'job_failed: an empty error is recorded as class Error, message ''''');

-- The backoff is capped at backoff_max; jitter spreads it.
SELECT isnt(pg_temp.enq('fc', 't_outcomes_fc', 'Capped'), NULL, 'job_failed setup: a job on its 10th attempt');
SELECT is(pg_temp.read1('t_outcomes_fc'), pg_temp.id('fc'), 'job_failed setup: read');
UPDATE pgmq.q_t_outcomes_fc SET read_ct = 10;
SELECT is(pgbus.job_failed('t_outcomes_fc', pg_temp.id('fc'), '{}', pg_temp.policy('capped')), 'retry', 'job_failed: attempt 10 of 101 is retry');
SELECT ok((pg_temp.msg('t_outcomes_fc', pg_temp.id('fc'))).vt BETWEEN now() + interval '60 seconds' AND clock_timestamp() + interval '60 seconds',
          'job_failed: the backoff is capped at backoff_max (60 s)');
SELECT isnt(pg_temp.enq('fj', 't_outcomes_fj', 'Jittery'), NULL, 'job_failed setup: a job with jitter 0.5');
SELECT is(pg_temp.read1('t_outcomes_fj'), pg_temp.id('fj'), 'job_failed setup: read');
SELECT is(pgbus.job_failed('t_outcomes_fj', pg_temp.id('fj'), '{}', pg_temp.policy('jitter')), 'retry', 'job_failed: retry with jitter');
SELECT ok((pg_temp.msg('t_outcomes_fj', pg_temp.id('fj'))).vt BETWEEN now() + interval '5 seconds' AND clock_timestamp() + interval '15 seconds',
          'job_failed: with jitter 0.5 the 10 s backoff is within 5-15 s');

-- record_stats => false: no stat on retry nor on dead letter.
SELECT isnt(pg_temp.enq('fq', 't_outcomes_fq', 'Quiet'), NULL, 'job_failed setup: a job failing without stats');
SELECT is(pg_temp.read1('t_outcomes_fq'), pg_temp.id('fq'), 'job_failed setup: read');
SELECT is(pgbus.job_failed('t_outcomes_fq', pg_temp.id('fq'), '{}', pg_temp.policy('two'), 10, false), 'retry',
          'job_failed: retry with record_stats => false');
SELECT is(pg_temp.failures('t_outcomes_fq'), 1::bigint, 'job_failed: record_stats => false still records the failure');
UPDATE pgmq.q_t_outcomes_fq SET read_ct = 3;
SELECT is(pgbus.job_failed('t_outcomes_fq', pg_temp.id('fq'), '{}', pg_temp.policy('two'), 10, false), 'dead_lettered',
          'job_failed: dead_lettered with record_stats => false');
SELECT is(pg_temp.stats('t_outcomes_fq'), '', 'job_failed: record_stats => false writes no stat at all');

-- Batch members: a retry counts nothing; a dead letter counts as discarded and can finish the batch.
INSERT INTO t_batch VALUES ('fail', pgbus.batch_open('fail', '{"case": "fail"}', '{"job_class": "Done", "queue": "t_outcomes_fcb"}',
                                                     '{"job_class": "Fine", "queue": "t_outcomes_fcb"}',
                                                     '{"job_class": "Lost", "queue": "t_outcomes_fcb"}'));
SELECT isnt(pg_temp.enq('fb', 't_outcomes_fb', 'Member', (SELECT id FROM t_batch WHERE name = 'fail')), NULL,
            'job_failed setup: the only batch member');
SELECT is(pgbus.batch_close((SELECT id FROM t_batch WHERE name = 'fail')), false, 'job_failed setup: batch closed');
SELECT is(pg_temp.read1('t_outcomes_fb'), pg_temp.id('fb'), 'job_failed setup: member read');
SELECT is(pgbus.job_failed('t_outcomes_fb', pg_temp.id('fb'), '{}', pg_temp.policy('none') || '{"max_retries": 1}'), 'retry',
          'job_failed: a batch member retries');
SELECT is((SELECT format('%s/%s/%s %s', completed_jobs, discarded_jobs, total_jobs, status) FROM pgbus.batches
           WHERE batch_id = (SELECT id FROM t_batch WHERE name = 'fail')), '0/0/1 processing',
          'job_failed: a retry does not count in the batch');
UPDATE pgmq.q_t_outcomes_fb SET read_ct = 2;
SELECT is(pgbus.job_failed('t_outcomes_fb', pg_temp.id('fb'), '{}', pg_temp.policy('none') || '{"max_retries": 1}'), 'dead_lettered',
          'job_failed: the batch member is dead-lettered');
SELECT is((SELECT format('%s/%s/%s %s', completed_jobs, discarded_jobs, total_jobs, status) FROM pgbus.batches
           WHERE batch_id = (SELECT id FROM t_batch WHERE name = 'fail')), '0/1/1 finished',
          'job_failed: the dead letter counts as discarded and finishes the batch');
SELECT results_eq(
    $$SELECT message ->> 'job_class' FROM pgmq.q_t_outcomes_fcb ORDER BY msg_id$$,
    $$VALUES ('Done'::text), ('Lost')$$,
    'job_failed: the batch sent on_complete and on_discard, not on_success');

SELECT throws_ok($$SELECT pgbus.job_failed('t_outcomes_fb', 1, '{}', '{"backoff_base": 1}')$$, '22023',
                 NULL, 'job_failed: a policy without max_retries is refused');
SELECT throws_ok($$SELECT pgbus.job_failed('t_outcomes_fb', 1, '{}', NULL)$$, '22023',
                 NULL, 'job_failed: a NULL policy is refused');

-- A backtrace given as a list of frames is kept as lines of text.
SELECT pgbus.ensure_queue('t_outcomes_bt');
SELECT pgmq.send('t_outcomes_bt', '{"job_class": "Bt"}');
SELECT pgmq.read('t_outcomes_bt', 30, 1);
SELECT is(pgbus.job_failed('t_outcomes_bt', (SELECT max(msg_id) FROM pgmq.q_t_outcomes_bt),
                           '{"class": "E", "message": "m", "backtrace": ["a.py:1 in f", "b.py:2 in g"]}',
                           '{"max_retries": 3, "backoff_base": 1, "backoff_max": 1, "jitter": 0}'),
          'retry', 'job_failed: a failure with a list backtrace is retried');
SELECT is((SELECT backtrace FROM pgbus.job_failures WHERE queue_name = 't_outcomes_bt'),
          E'a.py:1 in f\nb.py:2 in g', 'job_failed: a list backtrace is stored one frame per line');

SELECT * FROM finish();
ROLLBACK;
