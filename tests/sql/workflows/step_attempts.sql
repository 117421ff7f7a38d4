-- pgTAP tests for the crash-safety rules of a step attempt (sql/functions/070_workflow_steps.sql,
-- pgbus.read_jobs): an attempt is in progress only once its body started (read_jobs' start_now,
-- workflow_steps_started); a message that comes back while its attempt runs, for every run
-- status; the begin token (begun_at) that workflow_end_step checks; workflow_time_out_step.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(99);

CREATE FUNCTION pg_temp.cls(name text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$ SELECT 't_wsa_' || $1 $f$;
\ir ../include/workflow_helpers.psql
CREATE FUNCTION pg_temp.start(name text, steps text, arguments jsonb DEFAULT '{}') RETURNS uuid LANGUAGE plpgsql AS $f$
DECLARE
    r record;
BEGIN
    PERFORM pg_temp.reg(name, steps);
    SELECT * INTO r FROM pgbus.workflow_start(pg_temp.cls(name), arguments => start.arguments, actor => 'tester');
    INSERT INTO t_runs VALUES (name, r.workflow_id, r.duplicate_start);
    RETURN r.workflow_id;
END;
$f$;
-- Reads t_wsa_<queue> as a worker does, `start_now` of the rows to start at once (NULL: all).
CREATE FUNCTION pg_temp.read(tag text, queue text, start_now integer DEFAULT NULL, worker text DEFAULT 'host:1')
RETURNS integer LANGUAGE plpgsql AS $f$
DECLARE
    n integer;
BEGIN
    INSERT INTO t_reads
    SELECT read.tag, r.* FROM pgbus.read_jobs(ARRAY[pg_temp.cls(queue)], 30, 10, worker, 'rev', 'pause', start_now) r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$f$;
CREATE FUNCTION pg_temp.ctx(tag text) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT context FROM t_reads WHERE t_reads.tag = $1 ORDER BY msg_id DESC LIMIT 1
$f$;
-- The message of the run's current attempt comes back now (as after its worker died).
CREATE FUNCTION pg_temp.comes_back(name text) RETURNS void LANGUAGE sql AS $f$
    SELECT pgmq.set_vt(a.queue, a.msg_id, 0) FROM pgbus.workflow_steps a WHERE a.step_id = pg_temp.cur($1)
$f$;
CREATE FUNCTION pg_temp.token(tag text) RETURNS timestamptz LANGUAGE sql AS $f$
    SELECT (pg_temp.ctx($1) ->> 'begun_at')::timestamptz
$f$;

SELECT has_column('pgbus', 'workflow_steps', 'body_started_at', 'workflow_steps.body_started_at exists');
SELECT has_function('pgbus', 'workflow_steps_started', ARRAY['bigint[]', 'timestamp with time zone[]'],
                    'pgbus.workflow_steps_started(bigint[], timestamptz[]) exists');
SELECT has_function('pgbus', 'workflow_time_out_step', ARRAY['bigint', 'timestamp with time zone', 'text'],
                    'pgbus.workflow_time_out_step(bigint, timestamptz, text) exists');
SELECT hasnt_function('pgbus', 'workflow_begin_step', ARRAY['text', 'bigint', 'jsonb', 'text', 'text', 'text'],
                      'the earlier workflow_begin_step without body_started is gone');
SELECT hasnt_function('pgbus', 'read_jobs', ARRAY['text[]', 'integer', 'integer', 'text', 'text', 'text'],
                      'the earlier read_jobs without start_now is gone');

---------------------------------------------------------------------------------------------------
-- read_jobs(start_now): the first start_now rows start their body at once, the rest are read ahead
---------------------------------------------------------------------------------------------------
DO $d$ BEGIN
    PERFORM pg_temp.start('ra1', '[{"name": "a"}]');
    PERFORM pgbus.workflow_start(pg_temp.cls('ra1'));
    PERFORM pgbus.workflow_start(pg_temp.cls('ra1'));
END $d$;
SELECT is(pg_temp.read('ra', 'ra1', 1), 3, 'read_jobs: three step messages read');
SELECT results_eq(
    $$SELECT (context ->> 'body_started')::boolean FROM t_reads WHERE tag = 'ra' ORDER BY msg_id$$,
    $$VALUES (true), (false), (false)$$,
    'read_jobs(start_now => 1): the first starts at once, the two after it are read ahead');
SELECT results_eq(
    $$SELECT s.status, s.body_started_at IS NOT NULL FROM t_reads r
      JOIN pgbus.workflow_steps s ON s.step_id = (r.context ->> 'step_id')::bigint WHERE r.tag = 'ra' ORDER BY r.msg_id$$,
    $$VALUES ('running'::text, true), ('running', false), ('running', false)$$,
    'read_jobs: all three attempts are begun; only the first one''s body started');
SELECT is(pgbus.workflow_steps_started(
              ARRAY(SELECT (context ->> 'step_id')::bigint FROM t_reads WHERE tag = 'ra' ORDER BY msg_id OFFSET 1),
              ARRAY(SELECT (context ->> 'begun_at')::timestamptz FROM t_reads WHERE tag = 'ra' ORDER BY msg_id OFFSET 1)),
          ARRAY(SELECT (context ->> 'step_id')::bigint FROM t_reads WHERE tag = 'ra' ORDER BY msg_id OFFSET 1),
          'workflow_steps_started: marks the begins it is given and answers their step ids');
SELECT is((SELECT count(*) FROM t_reads r JOIN pgbus.workflow_steps s ON s.step_id = (r.context ->> 'step_id')::bigint
           WHERE r.tag = 'ra' AND s.body_started_at IS NULL), 0::bigint,
          'workflow_steps_started: ... all three bodies have started now');
SELECT is(pgbus.workflow_steps_started(ARRAY[(pg_temp.ctx('ra') ->> 'step_id')::bigint], ARRAY[now() - interval '1 hour']),
          '{}'::bigint[], 'workflow_steps_started: a begin token that is not the attempt''s marks nothing');
SELECT is(pgbus.workflow_steps_started('{}', '{}'), '{}'::bigint[], 'workflow_steps_started: nothing given, nothing marked');
SELECT is(pg_temp.read('rn', 'ra1'), 0, 'read_jobs: nothing left to read');
DO $d$ BEGIN PERFORM pgbus.workflow_start(pg_temp.cls('ra1')); END $d$;
SELECT is(pg_temp.read('rn', 'ra1'), 1, 'read_jobs without start_now: read');
SELECT is(pg_temp.ctx('rn') -> 'body_started', 'true'::jsonb, 'read_jobs without start_now: every body starts at once');

---------------------------------------------------------------------------------------------------
-- The message comes back while its attempt is running: each run status x body started or not
---------------------------------------------------------------------------------------------------
-- running, body never started (read ahead, its worker died): it simply runs; no stall.
DO $d$ BEGIN PERFORM pg_temp.start('run_ns', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.read('run_ns1', 'run_ns', 0), 1, 'setup: read ahead (start_now 0)');
SELECT lives_ok($$SELECT pg_temp.comes_back('run_ns')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('run_ns2', 'run_ns', 1, 'host:2'), 1, 'running, never started: the message is returned to run');
SELECT is(pg_temp.ctx('run_ns2') ? 'stalled', false, 'running, never started: ... not as a stall');
SELECT is((pg_temp.ctx('run_ns2') ->> 'step_id')::bigint, (pg_temp.ctx('run_ns1') ->> 'step_id')::bigint,
          'running, never started: ... the same attempt');
SELECT ok(pg_temp.token('run_ns2') > pg_temp.token('run_ns1'), 'running, never started: ... begun afresh (a new token)');
SELECT is(((pg_temp.att(pg_temp.cur('run_ns'))).worker, (pg_temp.w('run_ns')).status), ('host:2'::text, 'running'::text),
          'running, never started: ... now the second worker''s; the run is running');
SELECT is(pg_temp.events('run_ns') ~ 'stall', false, 'running, never started: no stall event');
-- The first begin's late end is stale and changes nothing; the message stays with the second.
SELECT is(pgbus.workflow_end_step(pg_temp.cur('run_ns'), 'complete', begun_at => pg_temp.token('run_ns1')) ->> 'code', 'stale',
          'workflow_end_step: the end of an earlier begin of the attempt is stale');
SELECT is(((pg_temp.att(pg_temp.cur('run_ns'))).status, pg_temp.has_amsg(pg_temp.cur('run_ns'))), ('running'::text, true),
          'workflow_end_step: ... the attempt still runs and its message is not archived under the current begin');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('run_ns'), 'complete', begun_at => pg_temp.token('run_ns2')) ->> 'ok', 'true',
          'workflow_end_step: the current begin''s end is accepted');
SELECT is(pg_temp.attempts('run_ns'), 'a#1:completed,b#1:scheduled', 'workflow_end_step: ... and the run goes on');

-- running, body started, read again by the worker running it (its heartbeat lapsed): held,
-- nothing changes.
DO $d$ BEGIN PERFORM pg_temp.start('held', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('held1', 'held', 1), 1, 'setup: read and started');
SELECT lives_ok($$SELECT pg_temp.comes_back('held')$$, 'setup: its message comes back');
DO $d$ BEGIN PERFORM pg_temp.mark('held_state', to_jsonb(pg_temp.att(pg_temp.cur('held')))); END $d$;
SELECT is(pg_temp.read('held2', 'held', 1, 'host:1'), 1, 'read by its own worker: answered');
SELECT is((pg_temp.ctx('held2') ->> 'held', (pg_temp.ctx('held2') ->> 'step_id')::bigint), ('true'::text, pg_temp.cur('held')),
          'read by its own worker: ... as held, with its step id');
SELECT is(to_jsonb(pg_temp.att(pg_temp.cur('held'))), pg_temp.marked('held_state'), 'read by its own worker: the attempt is untouched');
SELECT is((pg_temp.amsg(pg_temp.cur('held'))).vt > clock_timestamp(), true, 'read by its own worker: the message is hidden again');
SELECT is(pg_temp.events('held') ~ 'stall', false, 'read by its own worker: no stall');

-- running, body started: a stall (the stall action applies).
DO $d$ BEGIN PERFORM pg_temp.start('run_s', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('run_s1', 'run_s', 1), 1, 'setup: read and started');
SELECT lives_ok($$SELECT pg_temp.comes_back('run_s')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('run_s2', 'run_s', NULL, 'host:2'), 1, 'running, started: the message is answered');
SELECT is(pg_temp.ctx('run_s2') ->> 'stalled', 'true', 'running, started: ... as a stall');
SELECT is(((pg_temp.att(pg_temp.cur('run_s'))).status, (pg_temp.w('run_s')).status), ('stalled'::text, 'paused'::text),
          'running, started: the attempt is stalled and the run paused (stall action pause)');

-- running, body started on a worker that is still registered (cut off for longer than the
-- visibility timeout, say by an outage): the first time its message comes back to another
-- worker it waits one more visibility timeout for its own; its end is still accepted.
DO $d$ BEGIN
    PERFORM pg_temp.start('reg_s', '[{"name": "a"}]');
    INSERT INTO pgbus.processes (kind, hostname, pid) VALUES ('worker', 'cut', 7);
END $d$;
SELECT is(pg_temp.read('reg_s1', 'reg_s', 1, 'cut:7'), 1, 'setup: read and started by cut:7, a registered worker');
SELECT lives_ok($$SELECT pg_temp.comes_back('reg_s')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('reg_s2', 'reg_s', NULL, 'host:2'), 0,
          'running, started, its worker registered: nothing to run for another worker the first time');
SELECT is(((pg_temp.att(pg_temp.cur('reg_s'))).status, (pg_temp.w('reg_s')).status), ('running'::text, 'running'::text),
          'running, started, its worker registered: ... the attempt still runs, no stall');
SELECT ok((pg_temp.amsg(pg_temp.cur('reg_s'))).vt > clock_timestamp() + interval '20 seconds',
          'running, started, its worker registered: ... its message is hidden for the reader''s visibility timeout');
SELECT is((pg_temp.ev('reg_s', 'step_redelivered')).details - 'attempt',
          '{"step": "a", "worker": "cut:7", "reader": "host:2"}'::jsonb,
          'running, started, its worker registered: ... a step_redelivered event names both workers');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('reg_s'), 'complete', begun_at => pg_temp.token('reg_s1')) ->> 'ok', 'true',
          'running, started, its worker registered: ... and that worker''s end is accepted');
-- ... when it comes back again, its worker is gone: a stall.
DO $d$ BEGIN PERFORM pg_temp.start('reg_d', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('reg_d1', 'reg_d', 1, 'cut:7'), 1, 'setup: read and started by cut:7');
SELECT lives_ok($$SELECT pg_temp.comes_back('reg_d'); SELECT pg_temp.read('reg_d2', 'reg_d', NULL, 'host:2');
                  SELECT pg_temp.comes_back('reg_d')$$, 'setup: its message comes back twice');
SELECT is(pg_temp.read('reg_d3', 'reg_d', NULL, 'host:2'), 1, 'running, started, its worker registered: the second time ...');
SELECT is((pg_temp.ctx('reg_d3') ->> 'stalled', (pg_temp.att(pg_temp.cur('reg_d'))).status), ('true'::text, 'stalled'::text),
          'running, started, its worker registered: ... it is a stall');
-- ... unless that worker heartbeated since it came back: alive, cut off once more (another
-- outage during a long step), it gets one more visibility timeout each time.
DO $d$ BEGIN
    PERFORM pg_temp.start('reg_a', '[{"name": "a"}]');
    INSERT INTO pgbus.processes (kind, hostname, pid) VALUES ('worker', 'cut', 8);
END $d$;
SELECT is(pg_temp.read('reg_a1', 'reg_a', 1, 'cut:8'), 1, 'setup: read and started by cut:8');
SELECT lives_ok($$SELECT pg_temp.comes_back('reg_a'); SELECT pg_temp.read('reg_a2', 'reg_a', NULL, 'host:2');
                  UPDATE pgbus.processes SET last_heartbeat_at = clock_timestamp() WHERE hostname = 'cut' AND pid = 8;
                  SELECT pg_temp.comes_back('reg_a')$$,
                'setup: its message comes back, its worker heartbeats, it comes back again');
SELECT is(pg_temp.read('reg_a3', 'reg_a', NULL, 'host:2'), 0,
          'running, started, its worker heartbeated since it came back: nothing to run the second time');
SELECT is(((pg_temp.att(pg_temp.cur('reg_a'))).status, (pg_temp.w('reg_a')).status), ('running'::text, 'running'::text),
          'running, started, its worker heartbeated since: ... no stall, the attempt still runs');
SELECT is((SELECT count(*)::integer FROM pgbus.workflow_events
           WHERE workflow_id = pg_temp.run('reg_a') AND event = 'step_redelivered'), 2,
          'running, started, its worker heartbeated since: ... a second step_redelivered event');
-- Several workers in one process: the first is host:pid, the next host:pid#2 (pgbus.worker).
-- A step of the second that comes back to the first is another worker's, in a process that is
-- still registered: not held by the reader, not a stall the first time.
DO $d$ BEGIN
    PERFORM pg_temp.start('two_w', '[{"name": "a"}]');
    INSERT INTO pgbus.processes (kind, hostname, pid) VALUES ('worker', 'cut', 9);
END $d$;
SELECT is(pg_temp.read('two_w1', 'two_w', 1, 'cut:9#2'), 1, 'setup: read and started by cut:9#2');
SELECT lives_ok($$SELECT pg_temp.comes_back('two_w')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('two_w2', 'two_w', NULL, 'cut:9'), 0,
          'a second worker''s step read by the first worker of its process: nothing to run');
SELECT is(((pg_temp.att(pg_temp.cur('two_w'))).status, (pg_temp.att(pg_temp.cur('two_w'))).worker, pg_temp.events('two_w') ~ 'step_redelivered'),
          ('running'::text, 'cut:9#2'::text, true),
          '... not held by the reader: the attempt stays its worker''s, and a step_redelivered event says so');
SELECT lives_ok($$SELECT pg_temp.comes_back('reg_a')$$, 'setup: it comes back a third time, no heartbeat since');
SELECT is(pg_temp.read('reg_a4', 'reg_a', NULL, 'host:2'), 1, 'running, started, no heartbeat since it last came back: ...');
SELECT is((pg_temp.ctx('reg_a4') ->> 'stalled', (pg_temp.att(pg_temp.cur('reg_a'))).status), ('true'::text, 'stalled'::text),
          'running, started, no heartbeat since it last came back: ... a stall');

-- paused while the step ran, body started, its worker died: stalled while the run stays
-- paused; resume sends the step again.
DO $d$ BEGIN PERFORM pg_temp.start('pau_s', '[{"name": "a"}, {"name": "b"}]'); END $d$;
SELECT is(pg_temp.read('pau_s1', 'pau_s', 1), 1, 'setup: read and started');
SELECT is(pgbus.workflow_command(pg_temp.run('pau_s'), 'pause') ->> 'status', 'paused', 'setup: paused while it ran');
SELECT lives_ok($$SELECT pg_temp.comes_back('pau_s')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('pau_s2', 'pau_s', NULL, 'host:2'), 1, 'paused, started: the message is answered');
SELECT is(pg_temp.ctx('pau_s2') ->> 'stalled', 'true', 'paused, started: ... as a stall');
SELECT is(((pg_temp.att(pg_temp.cur('pau_s'))).status, (pg_temp.w('pau_s')).status), ('stalled'::text, 'paused'::text),
          'paused, started: the attempt is stalled; the run stays paused');
SELECT is(pg_temp.has_amsg(pg_temp.cur('pau_s'), 'a'), true, 'paused, started: the message is archived');
SELECT is(pgbus.workflow_command(pg_temp.run('pau_s'), 'resume') ->> 'status', 'ready', 'paused, started: resume makes it ready');
SELECT is(pg_temp.attempts('pau_s'), 'a#1:stalled,a#2:scheduled', 'paused, started: ... with the step scheduled again');
SELECT is(pg_temp.read('pau_s3', 'pau_s'), 1, 'paused, started: ... which a worker reads and runs');
SELECT is((pg_temp.ctx('pau_s3') ->> 'attempt')::int, 2, 'paused, started: ... attempt 2');

-- paused while it waited read ahead, body never started, its worker died: superseded; resume
-- sends the step again.
DO $d$ BEGIN PERFORM pg_temp.start('pau_ns', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('pau_ns1', 'pau_ns', 0), 1, 'setup: read ahead');
SELECT is(pgbus.workflow_command(pg_temp.run('pau_ns'), 'pause') ->> 'status', 'paused', 'setup: paused');
SELECT lives_ok($$SELECT pg_temp.comes_back('pau_ns')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('pau_ns2', 'pau_ns', NULL, 'host:2'), 0, 'paused, never started: nothing to run');
SELECT is(((pg_temp.att(pg_temp.cur('pau_ns'))).status, (pg_temp.w('pau_ns')).status), ('superseded'::text, 'paused'::text),
          'paused, never started: the attempt is superseded; the run stays paused');
SELECT is(pg_temp.events('pau_ns') ~ 'stall', false, 'paused, never started: no stall');
SELECT is((pg_temp.ev('pau_ns', 'step_released')).reason, 'its worker stopped before the step began',
          'paused, never started: step_released says why');
SELECT is(pgbus.workflow_command(pg_temp.run('pau_ns'), 'resume') ->> 'status', 'ready', 'paused, never started: resume makes it ready');
SELECT is(pg_temp.attempts('pau_ns'), 'a#1:superseded,a#2:scheduled', 'paused, never started: ... with the step scheduled again');

-- cancelled while it ran: the attempt ends with the run; nothing runs, nothing stalls.
DO $d$ BEGIN PERFORM pg_temp.start('can', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('can1', 'can', 1), 1, 'setup: read and started');
SELECT is(pgbus.workflow_command(pg_temp.run('can'), 'cancel') ->> 'status', 'cancelled', 'setup: cancelled while it ran');
SELECT lives_ok($$SELECT pg_temp.comes_back('can')$$, 'setup: its message comes back');
SELECT is(pg_temp.read('can2', 'can', NULL, 'host:2'), 0, 'cancelled: nothing to run');
SELECT is(((pg_temp.att(pg_temp.cur('can'))).status, (pg_temp.w('can')).status), ('superseded'::text, 'cancelled'::text),
          'cancelled: the attempt is superseded; the run stays cancelled');
SELECT is(pg_temp.has_amsg(pg_temp.cur('can'), 'a'), true, 'cancelled: the message is archived');
-- (A run is 'ready' or 'waiting' only with its current attempt scheduled or waiting, and
-- 'finished' only after its current attempt ended: none of them has a running attempt.)

---------------------------------------------------------------------------------------------------
-- workflow_time_out_step: a late return past the step's timeout
---------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('to', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('to1', 'to', 1), 1, 'setup: read and started');
SELECT is(pgbus.workflow_time_out_step(pg_temp.cur('to'), now() - interval '1 day'), NULL,
          'workflow_time_out_step: another begin''s token changes nothing');
SELECT is(pgbus.workflow_time_out_step(pg_temp.cur('to'), pg_temp.token('to1')), 'paused',
          'workflow_time_out_step: stalls the attempt and applies the action (pause)');
SELECT is(((pg_temp.att(pg_temp.cur('to'))).status, (pg_temp.att(pg_temp.cur('to'))).error ->> 'class'),
          ('stalled'::text, 'pgbus.StepStalled'::text), 'workflow_time_out_step: ... stalled, StepStalled');
SELECT is((pg_temp.ev('to', 'stall_detected')).details ->> 'detection', 'timeout', 'workflow_time_out_step: ... detection timeout');
SELECT is(pg_temp.has_amsg(pg_temp.cur('to'), 'a'), true, 'workflow_time_out_step: ... its message archived');
SELECT is(pgbus.workflow_time_out_step(pg_temp.cur('to'), pg_temp.token('to1')), NULL,
          'workflow_time_out_step: a second time changes nothing');
SELECT is(pgbus.workflow_end_step(pg_temp.cur('to'), 'complete', begun_at => pg_temp.token('to1')) ->> 'code', 'stale',
          'workflow_end_step: the timed-out begin''s end is stale');

-- workflow_release_steps clears the body's start too.
DO $d$ BEGIN PERFORM pg_temp.start('rel', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.read('rel1', 'rel', 1), 1, 'setup: read and started');
SELECT is(pgbus.workflow_release_steps(ARRAY[pg_temp.cur('rel')], 'host:1'), 1, 'workflow_release_steps: released');
SELECT is(((pg_temp.att(pg_temp.cur('rel'))).status, (pg_temp.att(pg_temp.cur('rel'))).body_started_at),
          ('scheduled'::text, NULL::timestamptz), 'workflow_release_steps: scheduled again, its body not started');

SELECT * FROM finish();
ROLLBACK;
