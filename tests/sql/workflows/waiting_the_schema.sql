-- pgTAP tests for sql/functions/075_workflow_waiting.sql: The schema: the new columns, the signals table and its CHECKs, the functions.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(43);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- The schema: the new columns, the signals table and its CHECKs, the functions.
-------------------------------------------------------------------------------------------------
SELECT col_type_is('pgbus', 'workflow_steps', 'wait_for', 'text', 'workflow_steps.wait_for is text');
SELECT col_type_is('pgbus', 'workflow_steps', 'batch_id', 'uuid', 'workflow_steps.batch_id is uuid');
SELECT col_type_is('pgbus', 'workflow_steps', 'waiting_since', 'timestamp with time zone', 'workflow_steps.waiting_since is timestamptz');
SELECT col_type_is('pgbus', 'workflow_steps', 'wait_deadline', 'timestamp with time zone', 'workflow_steps.wait_deadline is timestamptz');
SELECT col_type_is('pgbus', 'workflow_steps', 'wait_remaining', 'interval', 'workflow_steps.wait_remaining is interval');
SELECT col_type_is('pgbus', 'workflow_steps', 'timed_out', 'boolean', 'workflow_steps.timed_out is boolean');
SELECT col_not_null('pgbus', 'workflow_steps', 'timed_out', 'workflow_steps.timed_out is NOT NULL');
SELECT col_default_is('pgbus', 'workflow_steps', 'timed_out', 'false', 'workflow_steps.timed_out defaults to false');
SELECT col_type_is('pgbus', 'workflow_steps', 'signal_id', 'bigint', 'workflow_steps.signal_id is bigint');
SELECT has_table('pgbus', 'workflow_signals', 'pgbus.workflow_signals exists');
SELECT columns_are('pgbus', 'workflow_signals',
                   ARRAY['signal_id', 'workflow_id', 'name', 'payload', 'idempotency_key', 'status', 'step_name',
                         'step_id', 'actor', 'reason', 'created_at', 'claimed_at', 'consumed_at'],
                   'pgbus.workflow_signals has exactly its columns');
SELECT has_column('pgbus', 'workflow_signals', 'idempotency_key', 'workflow_signals.idempotency_key exists');
SELECT col_default_is('pgbus', 'workflow_signals', 'status', 'pending'::text, 'workflow_signals.status defaults to pending');
SELECT has_index('pgbus', 'workflow_signals', 'workflow_signals_idempotency_key', 'the signals'' idempotency key index exists');
SELECT index_is_unique('pgbus', 'workflow_signals', 'workflow_signals_idempotency_key', '... and is unique');

SELECT has_function('pgbus', 'workflow_batch_job_class', ARRAY[]::text[], 'pgbus.workflow_batch_job_class() exists');
SELECT has_function('pgbus', 'workflow_gate_context', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text'],
                    'pgbus.workflow_gate_context(workflows, workflow_steps, text) exists');
SELECT has_function('pgbus', 'workflow_take_signal', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'bigint'],
                    'pgbus.workflow_take_signal(workflows, workflow_steps, bigint) exists');
SELECT has_function('pgbus', 'workflow_open_fan_out', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'jsonb'],
                    'pgbus.workflow_open_fan_out(workflows, workflow_steps, jsonb) exists');
SELECT has_function('pgbus', 'workflow_wake', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text', 'jsonb'],
                    'pgbus.workflow_wake(workflows, workflow_steps, text, jsonb) exists');
SELECT has_function('pgbus', 'workflow_resolve', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text'],
                    'pgbus.workflow_resolve(workflows, workflow_steps, text) exists');
SELECT has_function('pgbus', 'workflow_settle_wait', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'bigint', 'text'],
                    'pgbus.workflow_settle_wait(workflows, workflow_steps, bigint, text) exists');
SELECT has_function('pgbus', 'workflow_park', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text', 'jsonb', 'bigint', 'text'],
                    'pgbus.workflow_park(workflows, workflow_steps, text, jsonb, bigint, text) exists');
SELECT has_function('pgbus', 'workflow_time_out', ARRAY['pgbus.workflows', 'pgbus.workflow_steps', 'text'],
                    'pgbus.workflow_time_out(workflows, workflow_steps, text) exists');
SELECT has_function('pgbus', 'workflow_fan_out_finished', ARRAY['bigint', 'text'], 'pgbus.workflow_fan_out_finished(bigint, text) exists');
SELECT has_function('pgbus', 'workflow_expire_wait', ARRAY['uuid', 'text'], 'pgbus.workflow_expire_wait(uuid, text) exists');
SELECT has_function('pgbus', 'workflow_end_step',
                    ARRAY['bigint', 'text', 'jsonb', 'jsonb', 'interval', 'text', 'bigint', 'jsonb', 'bigint', 'timestamptz'],
                    'pgbus.workflow_end_step(bigint, text, jsonb, jsonb, interval, text, bigint, jsonb, bigint, timestamptz) exists');
SELECT hasnt_function('pgbus', 'workflow_end_step', ARRAY['bigint', 'text', 'jsonb', 'jsonb', 'interval', 'text'],
                      'the earlier workflow_end_step(bigint, text, jsonb, jsonb, interval, text) is gone');
SELECT is(pgbus.workflow_batch_job_class(), 'pgbus.workflow:BatchFinishedJob', 'the fan-out callback class is pgbus.workflow:BatchFinishedJob');

-- The signals table's CHECKs, on a run of its own.
DO $d$ BEGIN PERFORM pg_temp.start('checks', '[{"name": "a"}]'); END $d$;
SELECT lives_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name) VALUES (pg_temp.run('checks'), 'ok')$$,
                'workflow_signals: a name alone is a signal');
SELECT results_eq($$SELECT status, payload, idempotency_key, claimed_at, consumed_at FROM pgbus.workflow_signals
                    WHERE workflow_id = pg_temp.run('checks')$$,
                  $$VALUES ('pending'::text, '{}'::jsonb, NULL::text, NULL::timestamptz, NULL::timestamptz)$$,
                  'workflow_signals: pending, empty payload, no key by default');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name) VALUES (pg_temp.run('checks'), '   ')$$,
                 '23514', NULL, 'workflow_signals: a blank name is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name) VALUES (pg_temp.run('checks'), repeat('n', 256))$$,
                 '23514', NULL, 'workflow_signals: a name longer than 255 is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'x', ' ')$$,
                 '23514', NULL, 'workflow_signals: a blank idempotency key is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'x', '')$$,
                 '23514', NULL, 'workflow_signals: an empty idempotency key is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, payload) VALUES (pg_temp.run('checks'), 'x', '[1]')$$,
                 '23514', NULL, 'workflow_signals: an array payload is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, payload) VALUES (pg_temp.run('checks'), 'x', '"text"')$$,
                 '23514', NULL, 'workflow_signals: a string payload is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, status) VALUES (pg_temp.run('checks'), 'x', 'taken')$$,
                 '23514', NULL, 'workflow_signals: an unknown status is refused');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, status) VALUES (pg_temp.run('checks'), 'x', 'claimed')$$,
                 '23514', NULL, 'workflow_signals: claimed without claimed_at is refused');
SELECT lives_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'x', 'k')$$,
                'workflow_signals: a real key is taken');
SELECT throws_ok($$INSERT INTO pgbus.workflow_signals (workflow_id, name, idempotency_key) VALUES (pg_temp.run('checks'), 'y', 'k')$$,
                 '23505', NULL, 'workflow_signals: the same key twice for one run is refused');
SELECT throws_ok($$UPDATE pgbus.workflow_steps SET status = 'parked' WHERE workflow_id = pg_temp.run('checks')$$,
                 '23514', NULL, 'workflow_steps: the status check still refuses an unknown status');
SELECT lives_ok($$UPDATE pgbus.workflow_steps SET status = 'waiting' WHERE workflow_id = pg_temp.run('checks')$$,
                'workflow_steps: the status check takes waiting');

SELECT * FROM finish();
ROLLBACK;
