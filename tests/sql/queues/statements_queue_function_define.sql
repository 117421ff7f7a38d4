-- pgTAP tests for sql/functions/005_queue_functions.sql: queue_function_define: one branch per queue of pgmq.meta, else the fallback; Which queues have a statement of their own; A queue's behaviour, with the statement written out and built on each call; queue_functions_refresh.
-- (Split from queue_functions.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(58);
\ir ../include/queue_functions_setup.psql
-------------------------------------------------------------------------------------------------
-- queue_function_define: one branch per queue of pgmq.meta, else the fallback.
-------------------------------------------------------------------------------------------------
SELECT pgbus.ensure_queue('qf_fast');
CREATE FUNCTION pg_temp.define_probe() RETURNS void LANGUAGE sql AS $f$
    SELECT pgbus.queue_function_define(
        $h$pg_temp.qf_probe(queue_name text) RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    r text;$h$,
        $s$SELECT %1$L || ' ' || %2$L$s$,
        'RETURN (%s);',
        E'EXECUTE %s INTO r;\nRETURN ''built: '' || r;')
$f$;
SELECT pg_temp.define_probe();
SELECT is(pg_temp.qf_probe('qf_fast'), 'q_qf_fast a_qf_fast',
          'a queue of pgmq.meta gets the statement written out, with its tables');
SELECT is(pg_temp.qf_probe('qf_nowhere'), 'built: q_qf_nowhere a_qf_nowhere',
          'any other queue gets the same statement built for it on the call');
SELECT throws_ok($$SELECT pgbus.queue_send(NULL, '{}', now())$$, '22004', NULL,
                 'a NULL queue name raises, and sends nothing');

SAVEPOINT no_queues;
DELETE FROM pgmq.meta;
SELECT lives_ok('SELECT pg_temp.define_probe()', 'with no queue at all it writes the built statement alone');
SELECT is(pg_temp.qf_probe('qf_fast'), 'built: q_qf_fast a_qf_fast', '... which serves every queue');
ROLLBACK TO SAVEPOINT no_queues;

-------------------------------------------------------------------------------------------------
-- Which queues have a statement of their own.
-------------------------------------------------------------------------------------------------
SELECT ok(pg_temp.has_branch('queue_send', 'qf_fast') AND pg_temp.has_branch('queue_read', 'qf_fast')
          AND pg_temp.has_branch('queue_archive', 'qf_fast'),
          'ensure_queue writes a branch for the queue it created into all three functions');
SELECT pgmq.create('qf_slow');
SELECT ok(NOT pg_temp.has_branch('queue_send', 'qf_slow'), 'a queue made by pgmq.create alone has none yet');

-------------------------------------------------------------------------------------------------
-- A queue's behaviour, with the statement written out and built on each call.
-------------------------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.behaves_as_a_queue(q text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
    first bigint;
    second bigint;
    later bigint;
    r record;
    a record;
BEGIN
    PERFORM pgmq.purge_queue(q);
    first := pgbus.queue_send(q, '{"n": 1}', clock_timestamp());
    second := pgbus.queue_send(q, '{"n": 2}', clock_timestamp());
    later := pgbus.queue_send(q, '{"n": 3}', clock_timestamp() + interval '1 hour');
    RETURN NEXT ok(first < second AND second < later, q || ': send returns increasing ids');
    EXECUTE format('SELECT * FROM pgmq.%I WHERE msg_id = $1', pgmq.format_table_name(q, 'q')) INTO r USING later;
    RETURN NEXT ok(r.message = '{"n": 3}' AND r.read_ct = 0 AND r.headers IS NULL AND r.vt > clock_timestamp() + interval '59 minutes',
                   q || ': the message is stored with its body, no headers, unread, visible at the time given');

    SELECT * INTO r FROM pgbus.queue_read(q, 30, 1);
    RETURN NEXT is(r.msg_id, first, q || ': read takes the oldest visible message first, one when asked for one');
    RETURN NEXT ok(r.read_ct = 1 AND r.last_read_at IS NOT NULL
                   AND r.vt BETWEEN clock_timestamp() + interval '29 seconds' AND clock_timestamp() + interval '31 seconds',
                   q || ': ... counted as read once and hidden for vt_seconds');
    RETURN NEXT is(r.message, '{"n": 1}'::jsonb, q || ': ... with its body');
    RETURN NEXT is((SELECT array_agg(m.msg_id) FROM pgbus.queue_read(q, 30, 10) m), ARRAY[second],
                   q || ': the next read skips the hidden one and the one not yet visible');
    RETURN NEXT is((SELECT count(*) FROM pgbus.queue_read(q, 30, 10)), 0::bigint, q || ': then nothing is visible');

    RETURN NEXT ok(pgbus.queue_archive(q, first), q || ': archive answers true for a message that was there');
    EXECUTE format('SELECT * FROM pgmq.%I WHERE msg_id = $1', pgmq.format_table_name(q, 'a')) INTO a USING first;
    RETURN NEXT ok(a.message = '{"n": 1}' AND a.read_ct = 1 AND a.last_read_at IS NOT NULL AND a.archived_at IS NOT NULL,
                   q || ': ... and moves it to the archive as it was');
    EXECUTE format('SELECT count(*) FROM pgmq.%I WHERE msg_id = $1', pgmq.format_table_name(q, 'q')) INTO r USING first;
    RETURN NEXT is(r.count, 0::bigint, q || ': ... out of the queue');
    RETURN NEXT ok(NOT pgbus.queue_archive(q, first), q || ': a second archive of it answers false');
    RETURN NEXT ok(NOT pgbus.queue_archive(q, -1), q || ': so does an id never sent');
    RETURN NEXT is((SELECT count(*) FROM pgbus.queue_read(q, 1, 0)), 0::bigint, q || ': a read of zero reads nothing');

    -- Sent earlier but visible later: the one that became visible first is read first.
    first := pgbus.queue_send(q, '{"n": 4}', clock_timestamp() - interval '1 second');
    second := pgbus.queue_send(q, '{"n": 5}', clock_timestamp() - interval '1 minute');
    RETURN NEXT is((SELECT array_agg(m.msg_id) FROM pgbus.queue_read(q, 30, 1) m), ARRAY[second],
                   q || ': read takes the message that became visible first, not the lowest id');
END;
$f$;
SELECT * FROM pg_temp.behaves_as_a_queue('qf_fast');
SELECT * FROM pg_temp.behaves_as_a_queue('qf_slow');

SELECT throws_ok($$SELECT pgbus.queue_send('qf_missing', '{}', now())$$, '42P01', NULL,
                 'send to a queue that does not exist raises as PGMQ does, and changes nothing');
SELECT throws_ok($$SELECT * FROM pgbus.queue_read('qf_missing', 30, 1)$$, '42P01', NULL, '... so does read');
SELECT throws_ok($$SELECT pgbus.queue_archive('qf_missing', 1)$$, '42P01', NULL, '... and archive');

-------------------------------------------------------------------------------------------------
-- queue_functions_refresh
-------------------------------------------------------------------------------------------------
SELECT lives_ok('SELECT pgbus.queue_functions_refresh()', 'refresh runs');
SELECT ok(pg_temp.has_branch('queue_send', 'qf_slow') AND pg_temp.has_branch('queue_read', 'qf_slow')
          AND pg_temp.has_branch('queue_archive', 'qf_slow'),
          'after a refresh a queue made by pgmq.create alone has its branches too');
SELECT * FROM pg_temp.behaves_as_a_queue('qf_slow');
SELECT lives_ok('SELECT pgbus.queue_functions_refresh(); SELECT pgbus.queue_functions_refresh()',
                'a second refresh changes nothing and fails nothing');
SELECT ok(pg_temp.has_branch('queue_send', 'qf_fast'), '... the branches stay');

SELECT pgmq.drop_queue('qf_slow');
SELECT pgbus.queue_functions_refresh();
SELECT ok(NOT pg_temp.has_branch('queue_send', 'qf_slow'), 'a dropped queue loses its branch at the next refresh');
SELECT pgmq.create('qf_slow');
SELECT is(pgbus.queue_archive('qf_slow', pgbus.queue_send('qf_slow', '{}', clock_timestamp())), true,
          '... and made again by pgmq.create, works with the statement built on each call');

SELECT * FROM finish();
ROLLBACK;
