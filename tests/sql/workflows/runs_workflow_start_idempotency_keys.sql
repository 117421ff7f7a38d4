-- pgTAP tests for sql/functions/060_workflow_core.sql and sql/functions/070_workflow_steps.sql: workflow_start: idempotency keys.
-- (Split from workflow_runs.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(12);
\ir ../include/workflow_runs_setup.psql
-------------------------------------------------------------------------------------------------
-- workflow_start: idempotency keys
-------------------------------------------------------------------------------------------------
DO $d$ BEGIN PERFORM pg_temp.reg('idem', '[{"name": "a"}]'); END $d$;
INSERT INTO t_runs SELECT 'k1', s.* FROM pgbus.workflow_start('t_wfr_idem', arguments => '{"n": 1}', idempotency_key => 'k1') s;
INSERT INTO t_runs SELECT 'k1_again', s.* FROM pgbus.workflow_start('t_wfr_idem', arguments => '{"n": 2}', idempotency_key => 'k1') s;
SELECT is((SELECT dup FROM t_runs WHERE name = 'k1'), false, 'workflow_start: the first start with a key is not a duplicate');
SELECT is((pg_temp.w('k1')).idempotency_key, 'k1', 'workflow_start: the key is stored');
SELECT is(pg_temp.run('k1_again'), pg_temp.run('k1'), 'workflow_start: the same key answers the same run');
SELECT is((SELECT dup FROM t_runs WHERE name = 'k1_again'), true, 'workflow_start: ... with duplicate_start = true');
SELECT is((SELECT count(*) FROM pgbus.workflows WHERE workflow_class = 't_wfr_idem'), 1::bigint,
          'workflow_start: a duplicate start creates no run');
SELECT is((pg_temp.w('k1')).arguments, '{"n": 1}'::jsonb, 'workflow_start: a duplicate start does not change the run');
SELECT is(pg_temp.events('k1'), 'started,step_scheduled', 'workflow_start: a duplicate start writes no event');
SELECT is((SELECT count(*) FROM pgbus.workflow_steps WHERE workflow_id = pg_temp.run('k1')), 1::bigint,
          'workflow_start: a duplicate start schedules no step');
DO $d$ BEGIN PERFORM pg_temp.reg('idem2', '[{"name": "a"}]'); END $d$;
INSERT INTO t_runs SELECT 'k1_other', s.* FROM pgbus.workflow_start('t_wfr_idem2', idempotency_key => 'k1') s;
SELECT isnt(pg_temp.run('k1_other'), pg_temp.run('k1'), 'workflow_start: the same key in another class is another run');
INSERT INTO t_runs SELECT 'blank1', s.* FROM pgbus.workflow_start('t_wfr_idem', idempotency_key => '') s;
INSERT INTO t_runs SELECT 'blank2', s.* FROM pgbus.workflow_start('t_wfr_idem', idempotency_key => '   ') s;
SELECT isnt(pg_temp.run('blank1'), pg_temp.run('blank2'), 'workflow_start: a blank key is no key (two runs)');
SELECT results_eq($$SELECT dup, (pg_temp.w(name)).idempotency_key FROM t_runs WHERE name IN ('blank1', 'blank2') ORDER BY name$$,
                  $$VALUES (false, NULL::text), (false, NULL::text)$$,
                  'workflow_start: a blank key is not stored and not a duplicate');
-- A repeated key answers its run even while that run is ongoing for its subject.
INSERT INTO t_runs SELECT 'k2', s.* FROM pgbus.workflow_start('t_wfr_idem', 'User', '1', idempotency_key => 'k2') s;
SELECT results_eq($$SELECT s.workflow_id, s.duplicate_start FROM pgbus.workflow_start('t_wfr_idem', 'User', '1', idempotency_key => 'k2') s$$,
                  $$VALUES (pg_temp.run('k2'), true)$$,
                  'workflow_start: a repeated key for an ongoing subject answers the run (no PB409)');

SELECT * FROM finish();
ROLLBACK;
