-- pgTAP tests for sql/functions/030_job_outcomes.sql: lock_message.
-- (Split from job_outcomes.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/job_outcomes_setup.psql
-------------------------------------------------------------------------------------------------
-- lock_message
-------------------------------------------------------------------------------------------------
SELECT isnt(pg_temp.enq('lock', 't_outcomes_lock', 'Locked'), NULL, 'lock_message setup: a job enqueued');
SELECT is(pg_temp.read1('t_outcomes_lock'), pg_temp.id('lock'), 'lock_message setup: the job read once');
SELECT results_eq(
    $$SELECT (m).msg_id, (m).read_ct, (m).message ->> 'job_class', (m).message -> 'args', (m).headers,
             (m).vt > clock_timestamp(), (m).last_read_at IS NOT NULL
      FROM (SELECT pgbus.lock_message('t_outcomes_lock', pg_temp.id('lock')) AS m) s$$,
    $$VALUES (pg_temp.id('lock'), 1, 'Locked'::text, '["lock"]'::jsonb, NULL::jsonb, true, true)$$,
    'lock_message: returns the message row (msg_id, read_ct, message, headers, vt, last_read_at)');
SELECT ok(pgbus.lock_message('t_outcomes_lock', 999999) IS NULL, 'lock_message: a message that is gone is NULL');
SELECT ok((pgbus.lock_message('t_outcomes_lock', 999999)).msg_id IS NULL, 'lock_message: a gone message has a NULL msg_id');
SELECT ok((pgbus.lock_message('t_outcomes_lock', NULL)).msg_id IS NULL, 'lock_message: a NULL msg_id is NULL');

SELECT * FROM finish();
ROLLBACK;
