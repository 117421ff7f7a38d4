-- pgTAP tests for sql/functions/010_queues.sql: extend_visibility.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(8);
\ir ../include/queues_setup.psql
-------------------------------------------------------------------------------------------------
-- extend_visibility
-------------------------------------------------------------------------------------------------
INSERT INTO t_ids SELECT 'v', id FROM pgbus.enqueue('t_queues_v', 'V', ARRAY['{}', '{}', '{}']::jsonb[]) AS id;
SELECT is((SELECT count(*) FROM pgbus.read_jobs(ARRAY['t_queues_v'], 1, 3)), 3::bigint,
          'extend_visibility setup: three messages read with a 1 s visibility timeout');
SELECT is(pgbus.extend_visibility('t_queues_v', (SELECT array_agg(id) FROM t_ids WHERE name = 'v'), 600), 3,
          'extend_visibility: counts every message still there');
SELECT ok((SELECT bool_and(vt > clock_timestamp() + interval '590 seconds') FROM pgmq.q_t_queues_v),
          'extend_visibility: the messages are hidden for another vt_seconds');
SELECT ok((SELECT bool_and(read_ct = 1) FROM pgmq.q_t_queues_v), 'extend_visibility: does not count as a read');
SELECT ok(pgmq.archive('t_queues_v', (SELECT min(id) FROM t_ids WHERE name = 'v')), 'extend_visibility setup: one message archived');
SELECT is(pgbus.extend_visibility('t_queues_v', (SELECT array_agg(id) FROM t_ids WHERE name = 'v'), 600), 2,
          'extend_visibility: an archived message is not counted');
SELECT is(pgbus.extend_visibility('t_queues_v', ARRAY[999999]::bigint[], 600), 0,
          'extend_visibility: unknown ids count 0');
SELECT is(pgbus.extend_visibility('t_queues_v', ARRAY[]::bigint[], 600), 0,
          'extend_visibility: no ids count 0');

SELECT * FROM finish();
ROLLBACK;
