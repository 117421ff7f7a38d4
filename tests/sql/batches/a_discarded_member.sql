-- pgTAP tests for sql/functions/020_batches.sql: A discarded member: on_complete + on_discard, not on_success.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);

-- Scratch space (dropped by the ROLLBACK).
CREATE TEMP TABLE t_b (name text PRIMARY KEY, id uuid);
CREATE TEMP TABLE t_n (name text PRIMARY KEY, n bigint);

-- Callback queues, one per kind of callback, so what was sent can be counted. Every batch below
-- has a distinct "case" in its properties; callbacks carry the properties as their single arg.
DO $$
BEGIN
    PERFORM pgbus.ensure_queue('t_batches_done');
    PERFORM pgbus.ensure_queue('t_batches_ok');
    PERFORM pgbus.ensure_queue('t_batches_bad');
END;
$$;

CREATE FUNCTION pg_temp.sent(queue text, kase text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
    n bigint;
BEGIN
    EXECUTE format($q$SELECT count(*) FROM pgmq.%I WHERE message -> 'args' -> 0 ->> 'case' = $1$q$, 'q_' || queue)
        INTO n USING kase;
    RETURN n;
END;
$f$;
-- Callbacks sent for a case, as on_complete / on_success / on_discard counts.
CREATE FUNCTION pg_temp.sent_all(kase text) RETURNS bigint[] LANGUAGE sql AS $f$
    SELECT ARRAY[pg_temp.sent('t_batches_done', kase), pg_temp.sent('t_batches_ok', kase),
                 pg_temp.sent('t_batches_bad', kase)]
$f$;
CREATE FUNCTION pg_temp.open(kase text) RETURNS uuid LANGUAGE sql AS $f$
    SELECT pgbus.batch_open('case ' || kase, jsonb_build_object('case', kase),
                            '{"job_class": "OnComplete", "queue": "t_batches_done"}',
                            '{"job_class": "OnSuccess", "queue": "t_batches_ok"}',
                            '{"job_class": "OnDiscard", "queue": "t_batches_bad"}')
$f$;
CREATE FUNCTION pg_temp.b(kase text) RETURNS uuid LANGUAGE sql AS $f$
    SELECT id FROM t_b WHERE name = kase
$f$;
CREATE FUNCTION pg_temp.counts(kase text) RETURNS text LANGUAGE sql AS $f$
    SELECT format('%s total, %s completed, %s discarded, %s', total_jobs, completed_jobs, discarded_jobs, status)
    FROM pgbus.batches WHERE batch_id = pg_temp.b(kase)
$f$;

-------------------------------------------------------------------------------------------------
-- A discarded member: on_complete + on_discard, not on_success.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('discard', pg_temp.open('discard'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('discard'))), 2::bigint, 'discard: two jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('discard')), false, 'discard: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('discard'), 'discarded'), false, 'batch_member_done: a discarded member, not finished');
SELECT is(pg_temp.counts('discard'), '2 total, 0 completed, 1 discarded, processing', 'batch_member_done: counts a discarded member');
SELECT is(pgbus.batch_member_done(pg_temp.b('discard'), 'completed'), true, 'batch_member_done: the last member finishes the batch');
SELECT is(pg_temp.counts('discard'), '2 total, 1 completed, 1 discarded, finished', 'discard: counters at finish');
SELECT is(pg_temp.sent_all('discard'), ARRAY[1, 0, 1]::bigint[],
          'batch finished with a discarded member: on_complete and on_discard, not on_success');
SELECT is((SELECT message -> 'args' FROM pgmq.q_t_batches_bad WHERE message -> 'args' -> 0 ->> 'case' = 'discard'),
          '[{"case": "discard"}]'::jsonb, 'discard: on_discard carries the batch properties');

INSERT INTO t_b VALUES ('alldiscard', pg_temp.open('alldiscard'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}']::jsonb[], NULL, pg_temp.b('alldiscard'))),
          1::bigint, 'alldiscard: one job enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('alldiscard')), false, 'alldiscard: close with a pending member');
SELECT is(pgbus.batch_member_done(pg_temp.b('alldiscard'), 'discarded'), true, 'alldiscard: the discarded last member finishes it');
SELECT is(pg_temp.sent_all('alldiscard'), ARRAY[1, 0, 1]::bigint[], 'alldiscard: on_complete and on_discard, not on_success');

SELECT * FROM finish();
ROLLBACK;
