-- pgTAP tests for sql/functions/020_batches.sql: The functions exist.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);

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
-- The functions exist.
-------------------------------------------------------------------------------------------------
SELECT has_function('pgbus', 'batch_open', ARRAY['text', 'jsonb', 'jsonb', 'jsonb', 'jsonb'],
                    'pgbus.batch_open(text, jsonb, jsonb, jsonb, jsonb) exists');
SELECT has_function('pgbus', 'batch_send_callbacks', ARRAY['pgbus.batches'],
                    'pgbus.batch_send_callbacks(pgbus.batches) exists');
SELECT has_function('pgbus', 'batch_finish_if_done', ARRAY['uuid'], 'pgbus.batch_finish_if_done(uuid) exists');
SELECT has_function('pgbus', 'batch_close', ARRAY['uuid'], 'pgbus.batch_close(uuid) exists');
SELECT has_function('pgbus', 'batch_member_done', ARRAY['uuid', 'text', 'integer'], 'pgbus.batch_member_done(uuid, text, integer) exists');
SELECT hasnt_function('pgbus', 'batch_member_done', ARRAY['uuid', 'text'], 'the earlier pgbus.batch_member_done(uuid, text) is gone');

SELECT * FROM finish();
ROLLBACK;
