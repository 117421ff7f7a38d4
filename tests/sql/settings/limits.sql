-- pgTAP tests for the settings SQL reads and the limits every caller meets
-- (sql/functions/130_limits.sql, sql/schema/0008_sql_api.sql).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(24);

SELECT pgbus.workflow_register('t_lim', '[{"name": "one"}, {"name": "two"}]', 'd1', 't_lim');

-- Settings
SELECT is(pgbus.setting('workflow_max_payload_size'), '65536'::jsonb, 'setting: the payload limit is 65536 bytes at first');
SELECT is(pgbus.workflow_max_payload_size(), 65536, 'workflow_max_payload_size: reads the setting');
SELECT is(pgbus.setting('no_such_setting'), NULL, 'setting: NULL for an unknown name');
SELECT throws_ok($$SELECT pgbus.setting_set('no_such_setting', '1')$$, '22023', 'pgbus: unknown setting ''no_such_setting''',
                 'setting_set: refuses an unknown setting');
SELECT throws_ok($$SELECT pgbus.setting_set('workflow_max_payload_size', '100')$$, '22023',
                 'pgbus: setting workflow_max_payload_size is a whole number from 256 to 2147483647, got 100',
                 'setting_set: refuses a payload limit below 256');
SELECT throws_ok($$SELECT pgbus.setting_set('workflow_max_payload_size', '"big"')$$, '22023', NULL,
                 'setting_set: refuses a value that is not a number');
SELECT throws_ok($$SELECT pgbus.setting_set('actor_max_length', '256')$$, '22023', NULL,
                 'setting_set: refuses an actor limit above the column''s 255');
SELECT is(pgbus.setting_set('workflow_max_payload_size', '300'), '300'::jsonb, 'setting_set: answers the new value');
SELECT is(pgbus.workflow_max_payload_size(), 300, 'setting_set: the new limit applies at once');

-- Payloads: arguments, outputs, signal payloads
SELECT throws_ok(format($$SELECT * FROM pgbus.workflow_start('t_lim', arguments => '{"x": "%s"}')$$, repeat('a', 400)),
                 'PB413', 'pgbus: the workflow''s arguments: 409 bytes, more than workflow_max_payload_size (300)',
                 'workflow_start: arguments over the limit raise PB413');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_lim'), 0::bigint,
          'workflow_start: a refused start stores nothing');
CREATE TEMP TABLE t_run AS SELECT * FROM pgbus.workflow_start('t_lim', arguments => format('{"x": "%s"}', repeat('a', 200))::jsonb);
SELECT is((SELECT count(*) FROM t_run), 1::bigint, 'workflow_start: arguments within the limit are stored');
SELECT throws_ok(format($$UPDATE pgbus.workflow_steps SET output = '{"x": "%s"}' WHERE workflow_id = (SELECT workflow_id FROM t_run)$$,
                        repeat('b', 400)),
                 'PB413', 'pgbus: the step''s output: 409 bytes, more than workflow_max_payload_size (300)',
                 'a step''s output over the limit raises PB413, whoever writes it');
SELECT lives_ok(format($$UPDATE pgbus.workflow_steps SET output = '{"x": "%s"}' WHERE workflow_id = (SELECT workflow_id FROM t_run)$$,
                       repeat('b', 250)),
                'a step''s output within the limit is stored');
SELECT throws_ok(format($$SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'signal', NULL, NULL,
                                                        '{"name": "s", "payload": {"x": "%s"}}')$$, repeat('c', 400)),
                 'PB413', 'pgbus: the signal''s payload: 409 bytes, more than workflow_max_payload_size (300)',
                 'workflow_command signal: a payload over the limit raises PB413');
SELECT is((SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = (SELECT workflow_id FROM t_run)), 0::bigint,
          'workflow_command signal: a refused payload stores nothing');

-- Actor and reason
SELECT throws_ok(format($$SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'pause', '%s')$$, repeat('x', 256)),
                 '22023', 'pgbus: an actor is at most 255 characters, got 256', 'workflow_command: an actor over 255 characters raises');
SELECT throws_ok(format($$SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'pause', 'ops', '%s')$$, repeat('x', 1001)),
                 '22023', 'pgbus: a reason is at most 1000 characters, got 1001', 'workflow_command: a reason over 1000 characters raises');
SELECT is((SELECT status FROM pgbus.workflows WHERE workflow_id = (SELECT workflow_id FROM t_run)), 'ready',
          'workflow_command: a refused actor or reason changes nothing');
SELECT throws_ok(format($$SELECT * FROM pgbus.workflow_start('t_lim', actor => '%s')$$, repeat('x', 300)),
                 '22023', 'pgbus: an actor is at most 255 characters, got 300', 'workflow_start: an actor over 255 characters raises');
SELECT is(pgbus.setting_set('reason_max_length', '10'), '10'::jsonb, 'setting_set: the reason limit can be lowered');
SELECT throws_ok($$SELECT pgbus.workflow_command((SELECT workflow_id FROM t_run), 'pause', 'ops', 'eleven chars')$$,
                 '22023', 'pgbus: a reason is at most 10 characters, got 12', 'workflow_command: the lowered reason limit applies');
SELECT throws_ok(format($$INSERT INTO pgbus.workflow_events (workflow_id, event, actor) VALUES ((SELECT workflow_id FROM t_run), 'x', '%s')$$,
                        repeat('x', 256)),
                 '23514', NULL, 'workflow_events: a check keeps actors at 255 characters for any writer');
SELECT is((pgbus.workflow_command((SELECT workflow_id FROM t_run), 'pause', 'ops', 'short')) ->> 'status', 'paused',
          'workflow_command: an actor and reason within the limits pass');

SELECT * FROM finish();
ROLLBACK;
