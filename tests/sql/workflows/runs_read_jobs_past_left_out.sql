-- pgTAP tests for sql/functions/010_queues.sql: read_jobs reads past the step messages it leaves
-- out (stale, not due), so that a backlog of them does not hold back the due ones behind it.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);
\ir ../include/workflow_runs_setup.psql

-- Stale messages (their runs are gone) put ahead of a run's due step, in the run's own queue.
CREATE FUNCTION pg_temp.stale_ahead(queue text, n integer) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pgbus.enqueue(queue, pgbus.step_job_class(),
        ARRAY(SELECT jsonb_build_object('kwargs', jsonb_build_object('workflow_id', gen_random_uuid(),
                                                                     'step_id', 900000000 + i))
              FROM generate_series(1, n) i));
    -- (Visible before the run's message, which a read takes by vt.)
    EXECUTE format($u$UPDATE pgmq.%I m SET vt = now() - interval '1 hour' + m.msg_id * interval '1 millisecond'
                      WHERE (m.message -> 'kwargs' ->> 'step_id')::bigint >= 900000000$u$, 'q_' || queue);
END;
$f$;

-------------------------------------------------------------------------------------------------
-- 25 stale messages ahead of a due step: one read of qty 1 returns the step
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('past', '[{"name": "a"}]'); PERFORM pg_temp.stale_ahead('t_wfr_past', 25); END $d$;
SELECT is((SELECT count(*)::int FROM pgmq.q_t_wfr_past WHERE vt < (pg_temp.att(pg_temp.cur('past'))).scheduled_at), 25,
          'setup: 25 stale messages are visible before the step''s');
CREATE TEMP TABLE t_past AS SELECT * FROM pgbus.read_jobs(ARRAY['t_wfr_past'], 30, 1, 'host:1');
SELECT results_eq($$SELECT msg_id, (context ->> 'step_id')::bigint FROM t_past$$,
                  $$VALUES ((pg_temp.att(pg_temp.cur('past'))).msg_id, pg_temp.cur('past'))$$,
                  'read_jobs: a read of qty 1 returns the due step behind 25 stale messages');
SELECT is((SELECT count(*)::int FROM pgmq.q_t_wfr_past), 1, 'read_jobs: ... the stale ones left the queue (only the step''s is there)');
SELECT is((SELECT count(*)::int FROM pgmq.a_t_wfr_past), 25, 'read_jobs: ... they are archived');
SELECT is((pg_temp.att(pg_temp.cur('past'))).status, 'running', 'read_jobs: ... and the step began');

-------------------------------------------------------------------------------------------------
-- qty still bounds what is returned; a message not due is left out and stays hidden
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN
    PERFORM pg_temp.start('past2', '[{"name": "a"}]');
    PERFORM pg_temp.start('past3', '[{"name": "a"}]');
    PERFORM pg_temp.start('past4', '[{"name": "a"}]');
    -- All three runs' messages in one queue, past2's first; past2's step is rescheduled later.
    INSERT INTO pgmq.q_t_wfr_past (vt, message)
    SELECT now() - interval '30 minutes' + k * interval '1 second', m.message
    FROM unnest(ARRAY['past2', 'past3', 'past4']) WITH ORDINALITY AS t(name, k)
    JOIN LATERAL (SELECT q.message FROM pgmq.q_t_wfr_past2 q UNION ALL SELECT q.message FROM pgmq.q_t_wfr_past3 q
                  UNION ALL SELECT q.message FROM pgmq.q_t_wfr_past4 q) m
      ON (m.message -> 'kwargs' ->> 'workflow_id')::uuid = pg_temp.run(t.name);
    UPDATE pgbus.workflow_steps SET scheduled_at = now() + interval '1 hour' WHERE step_id = pg_temp.cur('past2');
    PERFORM pg_temp.stale_ahead('t_wfr_past', 3);
END $d$;
CREATE TEMP TABLE t_past2 AS SELECT * FROM pgbus.read_jobs(ARRAY['t_wfr_past'], 30, 1, 'host:1');
SELECT results_eq($$SELECT (context ->> 'workflow_id')::uuid FROM t_past2$$, $$VALUES (pg_temp.run('past3'))$$,
                  'read_jobs: past 3 stale messages and one not due, qty 1 returns the next due step only');
SELECT is((SELECT read_ct FROM pgmq.q_t_wfr_past WHERE (message -> 'kwargs' ->> 'workflow_id')::uuid = pg_temp.run('past4')), 0,
          'read_jobs: ... the step after it is not read');
SELECT ok((SELECT vt >= (pg_temp.att(pg_temp.cur('past2'))).scheduled_at FROM pgmq.q_t_wfr_past
           WHERE (message -> 'kwargs' ->> 'workflow_id')::uuid = pg_temp.run('past2')),
          'read_jobs: ... the step not due is hidden until it is due');
SELECT is((pg_temp.att(pg_temp.cur('past2'))).status, 'scheduled', 'read_jobs: ... and is not begun');

-------------------------------------------------------------------------------------------------
-- At most 1,000 left out per read: the rest, and the step, in the next read
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN
    DELETE FROM pgmq.q_t_wfr_past;
    PERFORM pg_temp.start('past5', '[{"name": "a"}]');
    INSERT INTO pgmq.q_t_wfr_past (vt, message) SELECT now() - interval '1 minute', q.message FROM pgmq.q_t_wfr_past5 q;
    PERFORM pg_temp.stale_ahead('t_wfr_past', 1005);
END $d$;
SELECT is((SELECT count(*)::int FROM pgbus.read_jobs(ARRAY['t_wfr_past'], 30, 1, 'host:1')), 0,
          'read_jobs: 1,005 stale messages ahead: the first read returns nothing');
SELECT is((SELECT count(*)::int FROM pgmq.q_t_wfr_past), 6, 'read_jobs: ... having archived 1,000 of them');
SELECT results_eq($$SELECT (context ->> 'workflow_id')::uuid FROM pgbus.read_jobs(ARRAY['t_wfr_past'], 30, 1, 'host:1')$$,
                  $$VALUES (pg_temp.run('past5'))$$, 'read_jobs: ... the next read archives the rest and returns the step');
SELECT is((SELECT count(*)::int FROM pgmq.q_t_wfr_past), 1, 'read_jobs: ... and only the step''s message is left');

SELECT * FROM finish();
ROLLBACK;
