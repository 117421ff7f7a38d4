-- pgTAP tests for signalling by subject (sql/functions/131_workflow_signal_subject.sql).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);

SELECT pgbus.workflow_register('t_wss', '[{"name": "gate", "wait_for": "paid"}, {"name": "after"}]', 'd1', 't_wss');
CREATE TEMP TABLE t_run AS SELECT * FROM pgbus.workflow_start('t_wss', 'Order', '7');

SELECT is(pgbus.workflow_signal_subject('t_wss', 'Order', '8', 'paid') - 'message',
          '{"ok": false, "code": "no_ongoing_run"}'::jsonb, 'no ongoing run for the subject: refused as no_ongoing_run');
SELECT is(pgbus.workflow_signal_subject('t_other', 'Order', '7', 'paid') ->> 'code', 'no_ongoing_run',
          'another class''s subject: no_ongoing_run');
SELECT throws_ok($$SELECT pgbus.workflow_signal_subject('t_wss', NULL, NULL, 'paid')$$, '22023',
                 'pgbus: signalling by subject needs a subject type and id', 'a missing subject raises');

CREATE TEMP TABLE t_ans AS SELECT pgbus.workflow_signal_subject('t_wss', 'Order', '7', 'paid', '{"amount": 42}', 'evt-1', 'stripe', 'webhook') AS a;
SELECT is((SELECT a ->> 'ok' FROM t_ans), 'true', 'the subject''s ongoing run takes the signal');
SELECT is((SELECT (a ->> 'workflow_id')::uuid FROM t_ans), (SELECT workflow_id FROM t_run), 'the answer names the run');
SELECT is((SELECT a ->> 'duplicate_delivery' FROM t_ans), 'false', 'a first delivery is no duplicate');
SELECT is((SELECT (name, payload, idempotency_key, actor, reason)::text FROM pgbus.workflow_signals
           WHERE workflow_id = (SELECT workflow_id FROM t_run)),
          '(paid,"{""amount"": 42}",evt-1,stripe,webhook)', 'the signal is stored with its payload, key, actor and reason');
SELECT is(pgbus.workflow_signal_subject('t_wss', 'Order', '7', 'paid', '{}', 'evt-1') ->> 'duplicate_delivery', 'true',
          'the same key again stores nothing: duplicate_delivery');
SELECT is((SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = (SELECT workflow_id FROM t_run)), 1::bigint,
          'one signal stored for two deliveries with one key');
SELECT is(pgbus.workflow_signal_subject('t_wss', 'Order', '7', '') ->> 'code', 'invalid',
          'a blank signal name is refused as invalid, as by workflow_command');

SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'cancel');
SELECT is(pgbus.workflow_signal_subject('t_wss', 'Order', '7', 'paid') ->> 'code', 'no_ongoing_run',
          'once the run ended: no_ongoing_run');
SELECT is((SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = (SELECT workflow_id FROM t_run)), 1::bigint,
          'a refused signal stores nothing');

SELECT * FROM finish();
ROLLBACK;
