-- pgTAP tests for sql/functions/020_batches.sql: batch_finish_if_done on unknown batches; batch_member_done refusals and a gone batch.
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
-- batch_finish_if_done on unknown batches; batch_member_done refusals and a gone batch.
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.batch_finish_if_done('00000000-0000-0000-0000-000000000000'), false, 'batch_finish_if_done: an unknown batch is false');
SELECT is(pgbus.batch_finish_if_done(NULL), false, 'batch_finish_if_done: NULL is false');
SELECT is(pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'completed'), false,
          'batch_member_done: a batch that is gone counts nothing (false)');
SELECT is(pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'discarded'), false,
          'batch_member_done: a discard for a batch that is gone is false');

INSERT INTO t_b VALUES ('refuse', pg_temp.open('refuse'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}']::jsonb[], NULL, pg_temp.b('refuse'))),
          1::bigint, 'refuse: one job enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('refuse')), false, 'refuse: close with a pending member');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'failed')$$, pg_temp.b('refuse')), '22023',
                 'pgbus: batch member outcome is completed or discarded, got failed',
                 'batch_member_done: refuses outcome "failed"');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'Completed')$$, pg_temp.b('refuse')), '22023', NULL,
                 'batch_member_done: outcomes are case-sensitive');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, '')$$, pg_temp.b('refuse')), '22023', NULL,
                 'batch_member_done: refuses an empty outcome');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, NULL)$$, pg_temp.b('refuse')), '22023', NULL,
                 'batch_member_done: refuses a NULL outcome');
SELECT throws_ok($$SELECT pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'bogus')$$, '22023', NULL,
                 'batch_member_done: refuses a bad outcome even for a batch that is gone');
SELECT is(pg_temp.counts('refuse'), '1 total, 0 completed, 0 discarded, processing', 'batch_member_done: refused outcomes count nothing');

SELECT * FROM finish();
ROLLBACK;
