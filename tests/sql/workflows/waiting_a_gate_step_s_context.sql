-- pgTAP tests for sql/functions/075_workflow_waiting.sql: A gate step's context: the signal it claimed first, then the pending ones of its name, oldest first.
-- (Split from workflow_waiting.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(15);
\ir ../include/workflow_waiting_setup.psql
-------------------------------------------------------------------------------------------------
-- A gate step's context: the signal it claimed first, then the pending ones of its name, oldest first
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.start('ctx', pg_temp.gate(3600)); END $d$;
SELECT is(pg_temp.signal('ctx', 'paid', '{"n": 1}') - 'signal_id', '{"ok": true, "status": "ready", "duplicate_delivery": false, "woke": false}'::jsonb,
          'signal before the gate step began: stored, the ready run stays ready, nothing woken');
SELECT pg_temp.mark('ctx_s1', to_jsonb((SELECT max(signal_id) FROM pgbus.workflow_signals WHERE workflow_id = pg_temp.run('ctx'))));
SELECT pg_temp.mark('ctx_s2', pg_temp.signal('ctx', 'other', '{"n": 2}') -> 'signal_id');
SELECT pg_temp.mark('ctx_s3', pg_temp.signal('ctx', 'paid', '{"n": 3}', 'k3') -> 'signal_id');
SELECT is(pg_temp.read('ctx', 'ctx'), 1, 'setup: the gate step begins');
SELECT is(ARRAY(SELECT (e ->> 'signal_id')::bigint FROM jsonb_array_elements(pg_temp.ctx('ctx') -> 'signals') WITH ORDINALITY t(e, i) ORDER BY i),
          ARRAY[pg_temp.id('ctx_s1'), pg_temp.id('ctx_s3')],
          'context: the pending signals named like the gate, oldest first (not the other name)');
SELECT is(pg_temp.ctx('ctx') -> 'signals' -> 1,
          jsonb_build_object('signal_id', pg_temp.id('ctx_s3'), 'name', 'paid', 'payload', '{"n": 3}'::jsonb, 'idempotency_key', 'k3',
                             'status', 'pending', 'created_at', (pg_temp.sig(pg_temp.id('ctx_s3'))).created_at),
          'context: a signal is its id, name, payload, key, status and created_at');
SELECT is(pg_temp.ctx('ctx') #> '{signals,0,idempotency_key}', 'null'::jsonb, 'context: a signal without a key has a null key');
-- The step takes the newer one and fails: the signal stays claimed; the next attempt sees it first.
SELECT is(pg_temp.end_step(pg_temp.cur('ctx'), 'pause', error => '{"class": "app.Boom", "message": "boom"}',
                           signal_id => pg_temp.id('ctx_s3')) ->> 'status', 'paused', 'setup: the step took s3 and failed');
SELECT is(pg_temp.cmd('ctx', 'resume') ->> 'status', 'ready', 'setup: resumed');
SELECT pg_temp.mark('ctx_s4', pg_temp.signal('ctx', 'paid', '{"n": 4}') -> 'signal_id');
SELECT is(pg_temp.read('ctx2', 'ctx'), 1, 'setup: attempt 2 begins');
SELECT is(ARRAY(SELECT format('%s:%s', e ->> 'signal_id', e ->> 'status')
                FROM jsonb_array_elements(pg_temp.ctx('ctx2') -> 'signals') WITH ORDINALITY t(e, i) ORDER BY i),
          ARRAY[pg_temp.id('ctx_s3') || ':claimed', pg_temp.id('ctx_s1') || ':pending', pg_temp.id('ctx_s4') || ':pending'],
          'context of the next attempt: the signal the step claimed first, then the pending ones oldest first');
SELECT results_eq($$SELECT (pg_temp.ctx('ctx2') ->> 'attempt')::int, (pg_temp.ctx('ctx2') ->> 'waited')::boolean$$,
                  $$VALUES (2, false)$$, 'context of the next attempt: attempt 2, it never waited');

-- A gate for any name ('*').
DO $d$ BEGIN PERFORM pg_temp.start('any', pg_temp.gate(3600, NULL, '*')); END $d$;
SELECT pg_temp.mark('any_s1', pg_temp.signal('any', 'a') -> 'signal_id');
SELECT pg_temp.mark('any_s2', pg_temp.signal('any', 'b') -> 'signal_id');
SELECT is(pg_temp.read('any', 'any'), 1, 'setup: the any-name gate step begins');
SELECT is(ARRAY(SELECT (e ->> 'signal_id')::bigint FROM jsonb_array_elements(pg_temp.ctx('any') -> 'signals') WITH ORDINALITY t(e, i) ORDER BY i),
          ARRAY[pg_temp.id('any_s1'), pg_temp.id('any_s2')], 'context of a ''*'' gate: pending signals of every name');
SELECT is(pg_temp.park('any', pg_temp.id('any_s2')) ->> 'status', 'waiting', 'a ''*'' gate having seen both: waiting');
SELECT is(pg_temp.signal('any', 'whatever') ->> 'woke', 'true', 'a ''*'' gate: a signal of any name wakes it');

-- A step without a gate has no gate context.
DO $d$ BEGIN PERFORM pg_temp.go('plain', '[{"name": "a"}]'); END $d$;
SELECT is(pg_temp.ctx('plain') ?| ARRAY['wait_for', 'signals', 'timed_out', 'waited'], false,
          'begin_step of a step without a gate: no gate context');

SELECT * FROM finish();
ROLLBACK;
