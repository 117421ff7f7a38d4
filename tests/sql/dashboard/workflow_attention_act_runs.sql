-- pgTAP tests for pgbus.workflow_attention_act_runs (sql/functions/403_workflow_attention_act_runs.sql):
-- the bulk resume/cancel's answer plus the runs it acted on (for their instrumentation).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(8);

SELECT pgbus.workflow_register('t_aar', '[{"name": "charge"}, {"name": "receipt"}]', 'd1', 't_aar');
CREATE TEMP TABLE t_ids (n int, id uuid);
INSERT INTO t_ids SELECT i, (pgbus.workflow_start('t_aar', 'Order', i::text, '{}', actor => 't')).workflow_id
FROM generate_series(1, 4) i;
SELECT pgbus.workflow_end_step((r.context ->> 'step_id')::bigint, 'pause',
                               error => '{"class": "ValueError", "message": "no"}')
FROM pgbus.read_jobs(ARRAY['t_aar'], 30, 10, 'host:1', 'rev') r;
-- one run moves on before the bulk: resumed by someone else, no longer in the group
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE n = 4), 'resume', 'other');

SELECT is(pgbus.workflow_attention_act_runs('resume', 't_aar', 'charge', 'bored', 'ValueError', 'dashboard:t'),
          pgbus.workflow_attention_act('resume', 't_aar', 'charge', 'bored', 'ValueError', 'dashboard:t')
          || '{"runs": []}', 'a refused group: the same answer, no runs');
SELECT is(pgbus.workflow_attention_act_runs('cancel', 't_aar', 'charge', 'paused_error', 'ValueError',
                                            'dashboard:t', 'gone', max_runs => 2) - 'runs' - 'message',
          '{"ok": true, "done": 2, "failed": 0, "moved_on": 0, "more_may_wait": true}',
          'the answer of workflow_attention_act');
SELECT is((SELECT jsonb_agg(r ->> 'status') FROM jsonb_array_elements(
              pgbus.workflow_attention_act_runs('cancel', 't_aar', 'charge', 'paused_error', 'ValueError',
                                                'dashboard:t', 'gone') -> 'runs') r),
          '["cancelled"]', 'only the run this call cancelled, not the two an earlier call did');
SELECT is((SELECT count(*)::int FROM pgbus.workflows WHERE workflow_class = 't_aar' AND status = 'cancelled'), 3,
          'three runs cancelled in all');

-- a second group (the run resumed earlier failed again), resumed: each run listed once with
-- its class and the status it is in now
INSERT INTO t_ids SELECT 10 + i, (pgbus.workflow_start('t_aar', 'Order', (10 + i)::text, '{}', actor => 't')).workflow_id
FROM generate_series(1, 2) i;
SELECT pgbus.workflow_end_step((r.context ->> 'step_id')::bigint, 'pause',
                               error => '{"class": "KeyError", "message": "no"}')
FROM pgbus.read_jobs(ARRAY['t_aar'], 30, 10, 'host:1', 'rev') r;
CREATE TEMP TABLE t_answer AS
SELECT pgbus.workflow_attention_act_runs('resume', 't_aar', 'charge', 'paused_error', 'KeyError',
                                         'dashboard:u', 'fixed') AS a;
SELECT is((SELECT (a ->> 'done')::int FROM t_answer), 3, 'resumed three');
SELECT bag_eq($$SELECT (r ->> 'workflow_id')::uuid FROM t_answer, jsonb_array_elements(a -> 'runs') r$$,
              $$SELECT id FROM t_ids WHERE n > 10 OR n = 4$$, 'the runs it resumed, each once');
SELECT is((SELECT jsonb_agg(DISTINCT r - 'workflow_id') FROM t_answer, jsonb_array_elements(a -> 'runs') r),
          '[{"status": "ready", "workflow_class": "t_aar"}]', 'with their class and status now');
SELECT is(pgbus.workflow_attention_act_runs('resume', 't_aar', 'charge', 'paused_error', 'KeyError',
                                            'dashboard:u', 'again') -> 'runs',
          '[]', 'nothing left in the group: no runs');

SELECT * FROM finish();
ROLLBACK;
