-- pgTAP tests for sql/functions/020_batches.sql:
-- pgbus.batch_open, batch_send_callbacks, batch_finish_if_done, batch_close, batch_member_done.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(139);

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

-------------------------------------------------------------------------------------------------
-- batch_open
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('defaults', pgbus.batch_open());
SELECT results_eq(
    $$SELECT description, properties, on_complete, on_success, on_discard, total_jobs, completed_jobs,
             discarded_jobs, status, created_at, finished_at
      FROM pgbus.batches WHERE batch_id = pg_temp.b('defaults')$$,
    $$VALUES (NULL::text, '{}'::jsonb, NULL::jsonb, NULL::jsonb, NULL::jsonb, 0, 0, 0, 'open'::text, now(), NULL::timestamptz)$$,
    'batch_open: with defaults, an open, empty batch with no properties and no callbacks');

INSERT INTO t_b VALUES ('full', pgbus.batch_open(
    'nightly import', '{"case": "full", "nested": {"a": [1, 2]}, "s": "x"}',
    '{"job_class": "OnComplete", "queue": "t_batches_done"}',
    '{"job_class": "OnSuccess", "queue": "t_batches_ok"}',
    '{"job_class": "OnDiscard", "queue": "t_batches_bad"}'));
SELECT results_eq(
    $$SELECT description, properties, on_complete, on_success, on_discard, status
      FROM pgbus.batches WHERE batch_id = pg_temp.b('full')$$,
    $$VALUES ('nightly import'::text, '{"case": "full", "nested": {"a": [1, 2]}, "s": "x"}'::jsonb,
              '{"job_class": "OnComplete", "queue": "t_batches_done"}'::jsonb,
              '{"job_class": "OnSuccess", "queue": "t_batches_ok"}'::jsonb,
              '{"job_class": "OnDiscard", "queue": "t_batches_bad"}'::jsonb, 'open'::text)$$,
    'batch_open: stores description, properties and callbacks');
SELECT isnt(pg_temp.b('full'), pg_temp.b('defaults'), 'batch_open: every batch gets its own id');

INSERT INTO t_b VALUES ('nullprops', pgbus.batch_open('p', NULL));
SELECT is((SELECT properties FROM pgbus.batches WHERE batch_id = pg_temp.b('nullprops')), '{}'::jsonb,
          'batch_open: NULL properties are stored as {}');

-- Refusals.
INSERT INTO t_n SELECT 'before refusals', count(*) FROM pgbus.batches;
SELECT throws_ok($$SELECT pgbus.batch_open('x', '[]')$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses array properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '"text"')$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses string properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '42')$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses number properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', 'null'::jsonb)$$, '22023', 'pgbus: batch properties must be a JSON object',
                 'batch_open: refuses JSON null properties');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": "X"}')$$, '22023',
                 'pgbus: a batch callback is {"job_class": ..., "queue": ...}, got {"job_class": "X"}',
                 'batch_open: refuses an on_complete without a queue');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_success => '{"queue": "t_batches_ok"}')$$, '22023', NULL,
                 'batch_open: refuses an on_success without a job_class');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_discard => '[{"job_class": "X", "queue": "t_batches_bad"}]')$$,
                 '22023', NULL, 'batch_open: refuses an on_discard that is an array');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '"t_batches_done"')$$, '22023', NULL,
                 'batch_open: refuses a callback that is a string');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": null, "queue": "t_batches_done"}')$$,
                 '22023', NULL, 'batch_open: refuses a callback whose job_class is JSON null');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": "X", "queue": null}')$$,
                 '22023', NULL, 'batch_open: refuses a callback whose queue is JSON null');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', NULL, NULL, '{}')$$, '22023', NULL,
                 'batch_open: refuses an empty callback object');
SELECT is((SELECT count(*) FROM pgbus.batches), (SELECT n FROM t_n WHERE name = 'before refusals'),
          'batch_open: refused calls created no batch');
-- A callback that could never be sent would make the batch's last member fail at finish time.
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_complete => '{"job_class": "X", "queue": "Not A Queue"}')$$,
                 '22023', NULL, 'batch_open: refuses a callback whose queue is not a valid queue name');
SELECT throws_ok($$SELECT pgbus.batch_open('x', '{}', on_success => '{"job_class": "", "queue": "t_batches_ok"}')$$,
                 '22023', NULL, 'batch_open: refuses a callback with an empty job_class');

-------------------------------------------------------------------------------------------------
-- batch_close: an empty batch finishes at close.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('empty', pg_temp.open('empty'));
SELECT is(pgbus.batch_close(pg_temp.b('empty')), true, 'batch_close: an empty batch finishes at close (true)');
SELECT results_eq(
    $$SELECT status, finished_at FROM pgbus.batches WHERE batch_id = pg_temp.b('empty')$$,
    $$VALUES ('finished'::text, now())$$,
    'batch_close: the empty batch is finished, finished_at set');
SELECT is(pg_temp.sent_all('empty'), ARRAY[1, 1, 0]::bigint[],
          'batch_close: an empty batch sends on_complete and on_success, not on_discard');
SELECT results_eq(
    $$SELECT message FROM pgmq.q_t_batches_done WHERE message -> 'args' -> 0 ->> 'case' = 'empty'$$,
    $$SELECT message FROM pgmq.q_t_batches_done WHERE message ->> 'job_class' = 'OnComplete'
                                                  AND message -> 'args' = '[{"case": "empty"}]'
                                                  AND message -> 'kwargs' = '{}'
                                                  AND message ->> 'queue' = 't_batches_done'
                                                  AND NOT message ? 'batch_id'$$,
    'batch callbacks: a job of the callback''s class in its queue, args [properties], kwargs {}, in no batch');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('empty')), false, 'batch_finish_if_done: a finished batch is not finished again');
SELECT is(pg_temp.sent_all('empty'), ARRAY[1, 1, 0]::bigint[], 'batch_finish_if_done: callbacks are not sent twice');
SELECT throws_ok(format('SELECT pgbus.batch_close(%L)', pg_temp.b('empty')), '55000',
                 format('pgbus: batch %s is not open', pg_temp.b('empty')),
                 'batch_close: refuses a batch that is already finished');
SELECT throws_ok(format($$SELECT * FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}']::jsonb[], NULL, %L)$$, pg_temp.b('empty')),
                 '55000', format('pgbus: batch %s is not open for new jobs', pg_temp.b('empty')),
                 'enqueue: a finished batch takes no new members');
SELECT throws_ok($$SELECT pgbus.batch_close('00000000-0000-0000-0000-000000000000')$$, '55000',
                 'pgbus: batch 00000000-0000-0000-0000-000000000000 is not open',
                 'batch_close: refuses a batch that does not exist');

-- The batch's properties travel to the callbacks as they are.
SELECT is(pgbus.batch_close(pg_temp.b('full')), true, 'batch_close: the empty "full" batch finishes');
SELECT is((SELECT message -> 'args' FROM pgmq.q_t_batches_ok WHERE message -> 'args' -> 0 ->> 'case' = 'full'),
          '[{"case": "full", "nested": {"a": [1, 2]}, "s": "x"}]'::jsonb,
          'batch callbacks: the single arg is the batch''s properties');
INSERT INTO t_b VALUES ('nullprop', pgbus.batch_open('p', '{"case": "nullprop", "note": null}',
                                                     '{"job_class": "OnComplete", "queue": "t_batches_done"}'));
SELECT is(pgbus.batch_close(pg_temp.b('nullprop')), true, 'batch_close: the empty "nullprop" batch finishes');
SELECT is((SELECT message -> 'args' FROM pgmq.q_t_batches_done WHERE message -> 'args' -> 0 ->> 'case' = 'nullprop'),
          '[{"case": "nullprop", "note": null}]'::jsonb,
          'batch callbacks: properties holding a null value reach the callback unchanged');

-- A batch without callbacks finishes and sends nothing; a callback queue is created when missing.
INSERT INTO t_n SELECT 'callbacks before', (SELECT count(*) FROM pgmq.q_t_batches_done) + (SELECT count(*) FROM pgmq.q_t_batches_ok)
                                           + (SELECT count(*) FROM pgmq.q_t_batches_bad);
SELECT is(pgbus.batch_close(pg_temp.b('defaults')), true, 'batch_close: an empty batch without callbacks finishes');
SELECT is((SELECT count(*) FROM pgmq.q_t_batches_done) + (SELECT count(*) FROM pgmq.q_t_batches_ok)
          + (SELECT count(*) FROM pgmq.q_t_batches_bad), (SELECT n FROM t_n WHERE name = 'callbacks before'),
          'batch_close: a batch without callbacks sends nothing');
INSERT INTO t_b VALUES ('newq', pgbus.batch_open('p', '{"case": "newq"}', '{"job_class": "OnComplete", "queue": "t_batches_new"}'));
SELECT is(pgbus.batch_close(pg_temp.b('newq')), true, 'batch_close: a batch whose callback queue is missing finishes');
SELECT is(pg_temp.sent('t_batches_new', 'newq'), 1::bigint, 'batch callbacks: the callback queue is created and gets the job');

-------------------------------------------------------------------------------------------------
-- Members complete: counters, exactly-once finish, on_complete + on_success.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('members', pg_temp.open('members'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('members'))), 3::bigint, 'members: three jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('members')), false, 'batch_close: a batch with pending members does not finish (false)');
SELECT results_eq(
    $$SELECT status, finished_at FROM pgbus.batches WHERE batch_id = pg_temp.b('members')$$,
    $$VALUES ('processing'::text, NULL::timestamptz)$$,
    'batch_close: a batch with pending members is processing');
SELECT is(pg_temp.sent_all('members'), ARRAY[0, 0, 0]::bigint[], 'batch_close: no callbacks while members are pending');
SELECT throws_ok(format('SELECT pgbus.batch_close(%L)', pg_temp.b('members')), '55000', NULL,
                 'batch_close: refuses a batch that is processing');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('members')), false, 'batch_finish_if_done: false while members are pending');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), false, 'batch_member_done: first of three, not finished');
SELECT is(pg_temp.counts('members'), '3 total, 1 completed, 0 discarded, processing', 'batch_member_done: counts a completed member');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), false, 'batch_member_done: second of three, not finished');
SELECT is(pg_temp.sent_all('members'), ARRAY[0, 0, 0]::bigint[], 'batch_member_done: no callbacks before the last member');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), true, 'batch_member_done: the last member finishes the batch (true)');
SELECT is(pg_temp.counts('members'), '3 total, 3 completed, 0 discarded, finished', 'batch_member_done: all completed, finished');
SELECT is((SELECT finished_at FROM pgbus.batches WHERE batch_id = pg_temp.b('members')), now(), 'batch_member_done: finished_at set');
SELECT is(pg_temp.sent_all('members'), ARRAY[1, 1, 0]::bigint[],
          'batch finished with every member completed: on_complete and on_success, not on_discard');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('members')), false, 'batch_finish_if_done: true only once');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'completed'), false, 'batch_member_done: a finished batch counts nothing more (false)');
SELECT is(pgbus.batch_member_done(pg_temp.b('members'), 'discarded'), false, 'batch_member_done: a finished batch counts no discards (false)');
SELECT is(pg_temp.counts('members'), '3 total, 3 completed, 0 discarded, finished', 'batch_member_done: finished counters unchanged');
SELECT is(pg_temp.sent_all('members'), ARRAY[1, 1, 0]::bigint[], 'exactly-once: callbacks still sent once');

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

-------------------------------------------------------------------------------------------------
-- Members that finish before the batch is closed: counted, and the batch finishes at close.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('early', pg_temp.open('early'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL, pg_temp.b('early'))),
          2::bigint, 'early: two jobs enqueued in the batch');
SELECT is(pgbus.batch_member_done(pg_temp.b('early'), 'completed'), false, 'early: a member done while open does not finish it');
SELECT is(pgbus.batch_member_done(pg_temp.b('early'), 'completed'), false, 'early: the last member done while open does not finish it');
SELECT is(pg_temp.counts('early'), '2 total, 2 completed, 0 discarded, open', 'early: counted while open; still open');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('early')), false, 'batch_finish_if_done: an open batch does not finish');
SELECT is(pg_temp.sent_all('early'), ARRAY[0, 0, 0]::bigint[], 'early: no callbacks while open');
SELECT is(pgbus.batch_close(pg_temp.b('early')), true, 'batch_close: a batch whose members all finished already finishes at close');
SELECT is(pg_temp.counts('early'), '2 total, 2 completed, 0 discarded, finished', 'early: finished at close');
SELECT is(pg_temp.sent_all('early'), ARRAY[1, 1, 0]::bigint[], 'early: on_complete and on_success sent once');

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

-------------------------------------------------------------------------------------------------
-- batch_member_done with n: several members counted at once.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('many', pg_temp.open('many'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('many'))), 5::bigint, 'many: five jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('many')), false, 'many: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'completed', 2), false, 'batch_member_done n: two completed at once, not finished');
SELECT is(pg_temp.counts('many'), '5 total, 2 completed, 0 discarded, processing', 'batch_member_done n: counts 2 completed');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'discarded', n => 2), false, 'batch_member_done n: two discarded at once, not finished');
SELECT is(pg_temp.counts('many'), '5 total, 2 completed, 2 discarded, processing', 'batch_member_done n: counts 2 discarded');
SELECT is(pg_temp.sent_all('many'), ARRAY[0, 0, 0]::bigint[], 'batch_member_done n: no callbacks before the sum reaches total');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'completed', 1), true,
          'batch_member_done n: the call that makes the sum reach total finishes the batch (true)');
SELECT is(pg_temp.counts('many'), '5 total, 3 completed, 2 discarded, finished', 'batch_member_done n: counters at finish');
SELECT is(pg_temp.sent_all('many'), ARRAY[1, 0, 1]::bigint[], 'batch_member_done n: on_complete and on_discard, not on_success');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'completed', 2), false, 'batch_member_done n: a finished batch counts nothing more (false)');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('many')), false, 'batch_member_done n: the batch is not finished again');
SELECT is(pg_temp.counts('many'), '5 total, 3 completed, 2 discarded, finished', 'batch_member_done n: finished counters unchanged');
SELECT is(pg_temp.sent_all('many'), ARRAY[1, 0, 1]::bigint[], 'batch_member_done n: callbacks still sent once');

-- Every member in one call.
INSERT INTO t_b VALUES ('manyall', pg_temp.open('manyall'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('manyall'))), 3::bigint, 'manyall: three jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('manyall')), false, 'manyall: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('manyall'), 'completed', 3), true, 'batch_member_done n: n = total finishes at once (true)');
SELECT is(pg_temp.counts('manyall'), '3 total, 3 completed, 0 discarded, finished', 'batch_member_done n: all three counted');
SELECT is(pg_temp.sent_all('manyall'), ARRAY[1, 1, 0]::bigint[], 'batch_member_done n: on_complete and on_success, once');
INSERT INTO t_b VALUES ('manydisc', pg_temp.open('manydisc'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('manydisc'))), 2::bigint, 'manydisc: two jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('manydisc')), false, 'manydisc: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('manydisc'), 'discarded', 2), true, 'batch_member_done n: all discarded at once finishes (true)');
SELECT is(pg_temp.counts('manydisc'), '2 total, 0 completed, 2 discarded, finished', 'batch_member_done n: both counted as discarded');
SELECT is(pg_temp.sent_all('manydisc'), ARRAY[1, 0, 1]::bigint[], 'batch_member_done n: on_complete and on_discard, once');

-- While the batch is open: counted, finished at close.
INSERT INTO t_b VALUES ('manyearly', pg_temp.open('manyearly'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('manyearly'))), 3::bigint, 'manyearly: three jobs enqueued in the batch');
SELECT is(pgbus.batch_member_done(pg_temp.b('manyearly'), 'completed', 3), false,
          'batch_member_done n: reaching total while open does not finish');
SELECT is(pg_temp.counts('manyearly'), '3 total, 3 completed, 0 discarded, open', 'batch_member_done n: counted while open');
SELECT is(pgbus.batch_close(pg_temp.b('manyearly')), true, 'batch_member_done n: the batch finishes at close');
SELECT is(pg_temp.sent_all('manyearly'), ARRAY[1, 1, 0]::bigint[], 'batch_member_done n: callbacks sent once at close');

-- n must be at least 1.
INSERT INTO t_b VALUES ('refusen', pg_temp.open('refusen'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL, pg_temp.b('refusen'))),
          2::bigint, 'refusen: two jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('refusen')), false, 'refusen: close with pending members');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'completed', 0)$$, pg_temp.b('refusen')), '22023',
                 'pgbus: batch_member_done counts at least one member, got 0', 'batch_member_done: refuses n = 0');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'completed', -1)$$, pg_temp.b('refusen')), '22023', NULL,
                 'batch_member_done: refuses a negative n');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'completed', NULL)$$, pg_temp.b('refusen')), '22023', NULL,
                 'batch_member_done: refuses a NULL n');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'discarded', 0)$$, pg_temp.b('refusen')), '22023', NULL,
                 'batch_member_done: refuses n = 0 for discards too');
SELECT throws_ok($$SELECT pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'completed', 0)$$, '22023', NULL,
                 'batch_member_done: refuses n = 0 even for a batch that is gone');
SELECT is(pg_temp.counts('refusen'), '2 total, 0 completed, 0 discarded, processing', 'batch_member_done: a refused n counts nothing');
SELECT is(pg_temp.sent_all('refusen'), ARRAY[0, 0, 0]::bigint[], 'batch_member_done: a refused n sends no callbacks');
SELECT is(pgbus.batch_member_done(pg_temp.b('refusen'), 'completed', 2), true, 'batch_member_done: after the refusals, n = 2 finishes it');

-------------------------------------------------------------------------------------------------
-- batch_send_callbacks, called directly with a batch row.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('direct_ok', pg_temp.open('direct_ok'));
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_ok')),
                'batch_send_callbacks: runs on a batch row');
SELECT is(pg_temp.sent_all('direct_ok'), ARRAY[1, 1, 0]::bigint[],
          'batch_send_callbacks: nothing discarded sends on_complete and on_success');
INSERT INTO t_b VALUES ('direct_bad', pg_temp.open('direct_bad'));
UPDATE pgbus.batches SET total_jobs = 3, completed_jobs = 1, discarded_jobs = 2 WHERE batch_id = pg_temp.b('direct_bad');
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_bad')),
                'batch_send_callbacks: runs on a batch row with discards');
SELECT is(pg_temp.sent_all('direct_bad'), ARRAY[1, 0, 1]::bigint[],
          'batch_send_callbacks: something discarded sends on_complete and on_discard');
INSERT INTO t_b VALUES ('direct_some', pgbus.batch_open('p', '{"case": "direct_some"}', NULL,
                                                        '{"job_class": "OnSuccess", "queue": "t_batches_ok"}'));
SELECT lives_ok(format('SELECT pgbus.batch_send_callbacks(b) FROM pgbus.batches b WHERE batch_id = %L', pg_temp.b('direct_some')),
                'batch_send_callbacks: runs on a batch row with only on_success');
SELECT is(pg_temp.sent_all('direct_some'), ARRAY[0, 1, 0]::bigint[], 'batch_send_callbacks: NULL callbacks are skipped');
SELECT results_eq(
    $$SELECT message ->> 'job_class', message -> 'args', message -> 'kwargs'
      FROM pgmq.q_t_batches_ok WHERE message -> 'args' -> 0 ->> 'case' = 'direct_some'$$,
    $$VALUES ('OnSuccess'::text, '[{"case": "direct_some"}]'::jsonb, '{}'::jsonb)$$,
    'batch_send_callbacks: the job has the callback''s class and the properties as its single arg');

SELECT * FROM finish();
ROLLBACK;
