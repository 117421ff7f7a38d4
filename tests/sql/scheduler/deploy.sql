-- pgTAP tests for sql/functions/205_deploy_tasks.sql: the rollover rule (fleet_revisions,
-- fleet_rollover, fleet_status), deploy_tasks_declare, deploy_tasks_fire (rollover check, claim
-- per (task_key, arm), enqueue), deploy_task_run_now, deploy_task_set_enabled,
-- deploy_task_runs_of, deploy_task_list, cleanup_deploy_task_runs; the scheduler process kind.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(52);

DELETE FROM pgbus.processes;
DELETE FROM pgbus.deploy_task_runs;
DELETE FROM pgbus.deploy_tasks;

CREATE TEMP TABLE t_p (name text PRIMARY KEY, id bigint);
CREATE FUNCTION pg_temp.start(name text, kind text, revision text) RETURNS bigint LANGUAGE sql AS $f$
    INSERT INTO t_p VALUES ($1, pgbus.process_register($2, 'host', 1, $3)) RETURNING id
$f$;
CREATE FUNCTION pg_temp.stop(name text) RETURNS boolean LANGUAGE sql AS $f$
    SELECT pgbus.process_deregister((SELECT id FROM t_p WHERE t_p.name = $1))
$f$;
CREATE FUNCTION pg_temp.decl(key text, version text DEFAULT NULL, every_deploy boolean DEFAULT false,
                             enabled boolean DEFAULT true) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT jsonb_build_object('key', key, 'target', 'job', 'class_name', 'app.jobs:' || key,
                              'arguments', '{"args": [], "kwargs": {}}'::jsonb, 'queue_name', 't_dep_q',
                              'version', version, 'every_deploy', every_deploy, 'enabled', enabled)
$f$;
CREATE FUNCTION pg_temp.fired(result jsonb) RETURNS text LANGUAGE sql AS $f$
    SELECT coalesce(string_agg((f ->> 'task_key') || '@' || (f ->> 'arm'), ',' ORDER BY f ->> 'task_key'), '')
    FROM jsonb_array_elements(result -> 'fired') f
$f$;
CREATE FUNCTION pg_temp.queued() RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE n bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgmq.meta WHERE queue_name = 't_dep_q') THEN RETURN 0; END IF;
    SELECT count(*) INTO n FROM pgmq.q_t_dep_q;
    RETURN n;
END $f$;
CREATE TEMP TABLE t_decl AS SELECT jsonb_build_array(pg_temp.decl('backfill', '1'), pg_temp.decl('warm', every_deploy => true)) AS d;

SELECT has_table('pgbus', 'deploy_tasks', 'pgbus.deploy_tasks exists');
SELECT has_table('pgbus', 'deploy_task_runs', 'pgbus.deploy_task_runs exists');
SELECT lives_ok($$SELECT pg_temp.start('sched-check', 'scheduler', 'X')$$, 'processes: a scheduler can register');
SELECT pg_temp.stop('sched-check');

-------------------------------------------------------------------------------------------------
-- The rollover rule
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.fleet_rollover('A') ->> 'rolled_over', 'false', 'rollover: no live process: not rolled over');
SELECT pg_temp.start('a-disp', 'dispatcher', 'A');
SELECT is(pgbus.fleet_rollover('A') ->> 'rolled_over', 'false', 'rollover: every process on A but no worker: not rolled over');
SELECT pg_temp.start('a-work', 'worker', 'A');
SELECT is(pgbus.fleet_rollover('A') ->> 'rolled_over', 'true', 'rollover: every process on A and a worker on A: rolled over');
SELECT pg_temp.start('b-work', 'worker', 'B');
SELECT pg_temp.start('b-sched', 'scheduler', 'B');
SELECT is(pgbus.fleet_rollover('B'),
          '{"revision": "B", "rolled_over": false, "live": 4, "on_revision": 2, "workers_on_revision": 1,
            "others": [{"app_revision": "A", "processes": 2}]}'::jsonb,
          'rollover: B while A still runs: not rolled over, and says which revisions hold it back');
SELECT is(pgbus.fleet_rollover('A') ->> 'rolled_over', 'false', 'rollover: nor to A');
SELECT pg_temp.stop('a-work');
SELECT pg_temp.stop('a-disp');
SELECT is(pgbus.fleet_rollover('B') ->> 'rolled_over', 'true', 'rollover: A stopped: rolled over to B');
SELECT pg_temp.start('stale', 'worker', 'A');
UPDATE pgbus.processes SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = (SELECT id FROM t_p WHERE name = 'stale');
SELECT is(pgbus.fleet_rollover('B') ->> 'rolled_over', 'true', 'rollover: a process silent past live_within does not count');
SELECT is(pgbus.fleet_rollover('B', interval '1 hour') ->> 'rolled_over', 'false', 'rollover: within live_within it does');
SELECT pg_temp.stop('stale');
SELECT pg_temp.start('norev', 'worker', NULL);
SELECT is(pgbus.fleet_rollover('B') ->> 'rolled_over', 'false', 'rollover: a process with no revision counts as another one');
SELECT pg_temp.stop('norev');
SELECT results_eq($$SELECT app_revision, kind, processes FROM pgbus.fleet_revisions() ORDER BY kind$$,
                  $$VALUES ('B'::text, 'scheduler'::text, 1), ('B', 'worker', 1)$$,
                  'fleet_revisions: live processes per revision and kind');

-------------------------------------------------------------------------------------------------
-- deploy_tasks_fire
-------------------------------------------------------------------------------------------------
-- Not rolled over: nothing fires and the declarations are not written.
SELECT pg_temp.start('a-work2', 'worker', 'A');
CREATE TEMP TABLE t_r1 AS SELECT pgbus.deploy_tasks_fire('B', (SELECT d FROM t_decl)) AS r;
SELECT is((SELECT r ->> 'rolled_over' FROM t_r1), 'false', 'fire: B while A runs: not rolled over');
SELECT is((SELECT pg_temp.fired(r) FROM t_r1), '', 'fire: nothing fires');
SELECT is((SELECT count(*)::integer FROM pgbus.deploy_tasks), 0, 'fire: the declarations wait for the rollover');
SELECT is(pg_temp.queued(), 0::bigint, 'fire: nothing is sent');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('A', '[]')), '', 'fire: the old revision A does not fire either');

SELECT pg_temp.stop('a-work2');
CREATE TEMP TABLE t_r2 AS SELECT pgbus.deploy_tasks_fire('B', (SELECT d FROM t_decl)) AS r;
SELECT is((SELECT pg_temp.fired(r) FROM t_r2), 'backfill@version:1,warm@revision:B', 'fire: rolled over: each task fires once');
SELECT is(pg_temp.queued(), 2::bigint, 'fire: two messages');
SELECT results_eq($$SELECT key, version, every_deploy, declared_revision FROM pgbus.deploy_tasks ORDER BY key$$,
                  $$VALUES ('backfill'::text, '1'::text, false, 'B'::text), ('warm', NULL, true, 'B')$$,
                  'fire: the rolled-over revision''s declarations are written');
SELECT results_eq($$SELECT task_key, arm, version, app_revision, manual, msg_id IS NOT NULL FROM pgbus.deploy_task_runs ORDER BY task_key$$,
                  $$VALUES ('backfill'::text, 'version:1'::text, '1'::text, 'B'::text, false, true),
                           ('warm', 'revision:B', NULL, 'B', false, true)$$,
                  'fire: one run per task with its arm, revision and message');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('B', (SELECT d FROM t_decl))), '', 'fire: again: nothing (claimed)');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('B')), '', 'fire: without declarations: nothing');
SELECT is(pg_temp.queued(), 2::bigint, 'fire: still two messages');

-- The next deploy: C. The version task does not run again for the same version; every_deploy does.
SELECT pg_temp.stop('b-work');
SELECT pg_temp.stop('b-sched');
SELECT pg_temp.start('c-work', 'worker', 'C');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('C', (SELECT d FROM t_decl))), 'warm@revision:C',
          'fire: revision C: every_deploy runs again, the version task does not');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('C', jsonb_build_array(pg_temp.decl('backfill', '2'), pg_temp.decl('warm', every_deploy => true)))),
          'backfill@version:2', 'fire: a new version runs once');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('C', jsonb_build_array(pg_temp.decl('backfill', '2'), pg_temp.decl('warm', every_deploy => true),
                                                                     pg_temp.decl('extra', '1', enabled => false)))),
          '', 'fire: a task declared disabled does not fire');
SELECT is(pgbus.deploy_task_set_enabled('extra', true) ->> 'ok', 'true', 'set_enabled: enables it');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire('C')), 'extra@version:1', 'fire: enabled while the fleet is on C, it fires');
SELECT is(pgbus.deploy_task_set_enabled('nobody', true) ->> 'code', 'not_found', 'set_enabled: an unknown task is refused');

-- No revision anywhere: version tasks still run once the fleet (of no revision) has a worker;
-- every_deploy has nothing to key by.
SELECT pg_temp.stop('c-work');
SELECT pg_temp.start('n-work', 'worker', NULL);
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire(NULL, jsonb_build_array(pg_temp.decl('backfill', '3'), pg_temp.decl('warm', every_deploy => true)))),
          'backfill@version:3', 'fire: no revision: the version task fires, every_deploy waits for a revision');

-- Declarations refused whole.
SELECT throws_ok($$SELECT pgbus.deploy_tasks_fire(NULL, jsonb_build_array(pg_temp.decl('z', '1', every_deploy => true)))$$,
                 '22023', NULL, 'declare: version and every_deploy together are refused');
SELECT throws_ok($$SELECT pgbus.deploy_tasks_declare(jsonb_build_array(pg_temp.decl('z', '1'), pg_temp.decl('z', '2')))$$,
                 '23505', 'pgbus: deploy task z is declared twice', 'declare: a key declared twice is refused');
SELECT results_eq($$SELECT key FROM pgbus.deploy_tasks ORDER BY key$$, $$VALUES ('backfill'::text), ('warm')$$,
                  'declare: after a refusal the tasks are as they were');

-------------------------------------------------------------------------------------------------
-- run_now, runs_of, list, fleet_status
-------------------------------------------------------------------------------------------------
CREATE TEMP TABLE t_now AS SELECT pgbus.deploy_task_run_now('backfill', 'N') AS r;
SELECT is((SELECT r ->> 'manual' FROM t_now), 'true', 'run_now: a manual run');
SELECT is(pg_temp.fired(pgbus.deploy_tasks_fire(NULL)), '', 'run_now: claims no arm (the scheduler has nothing new)');
SELECT is(pgbus.deploy_task_run_now('nobody') ->> 'code', 'not_found', 'run_now: an unknown task is refused');
SELECT results_eq($$SELECT arm, manual FROM pgbus.deploy_task_runs_of('backfill')$$,
                  $$VALUES ('manual'::text, true), ('version:3', false), ('version:2', false), ('version:1', false)$$,
                  'runs_of: newest first');
SELECT results_eq($$SELECT key, arm, state, runs FROM pgbus.deploy_task_list()$$,
                  $$VALUES ('backfill'::text, 'version:3'::text, 'enqueued'::text, 4), ('warm', NULL, 'no_revision', 2)$$,
                  'list: the state of each task for the fleet''s revision');
SELECT pg_temp.stop('n-work');
SELECT pg_temp.start('d-work', 'worker', 'D');
SELECT pg_temp.start('e-work', 'worker', 'E');
SELECT results_eq($$SELECT key, state FROM pgbus.deploy_task_list()$$,
                  $$VALUES ('backfill'::text, 'enqueued'::text), ('warm', 'waiting_for_rollover')$$,
                  'list: every_deploy waits while two revisions run');
SELECT pg_temp.stop('d-work');
SELECT results_eq($$SELECT key, state FROM pgbus.deploy_task_list()$$,
                  $$VALUES ('backfill'::text, 'enqueued'::text), ('warm', 'due')$$,
                  'list: rolled over and unclaimed: due');
SELECT pgbus.deploy_task_set_enabled('warm', false);
SELECT is((SELECT state FROM pgbus.deploy_task_list() WHERE key = 'warm'), 'disabled', 'list: disabled');
SELECT is((pgbus.fleet_status() ->> 'rolled_over'), 'true', 'fleet_status: rolled over');
SELECT is((pgbus.fleet_status() ->> 'revision'), 'E', 'fleet_status: the newest revision');
SELECT is(jsonb_array_length(pgbus.fleet_status() -> 'processes'), 1, 'fleet_status: each live process');

-------------------------------------------------------------------------------------------------
-- cleanup_deploy_task_runs: history goes, each task's newest claim stays
-------------------------------------------------------------------------------------------------
UPDATE pgbus.deploy_task_runs SET enqueued_at = now() - interval '100 days';
SELECT is(pgbus.cleanup_deploy_task_runs(), 4, 'cleanup: removes the runs over 90 days old but each task''s newest claim');
SELECT results_eq($$SELECT task_key, arm FROM pgbus.deploy_task_runs ORDER BY task_key$$,
                  $$VALUES ('backfill'::text, 'version:3'::text), ('extra', 'version:1'), ('warm', 'revision:C')$$,
                  'cleanup: the newest claims stay, so the current versions do not fire again');
SELECT is(pgbus.cleanup_deploy_task_runs(), 0, 'cleanup: nothing more');

-------------------------------------------------------------------------------------------------
-- deploy_tasks_overview (the Deploy tasks page, MCP pgbus_deploy_tasks)
-------------------------------------------------------------------------------------------------
SELECT is(pgbus.deploy_tasks_overview() -> 'fleet', pgbus.fleet_status(), 'overview: the fleet status');
SELECT results_eq($$SELECT t ->> 'key', t ->> 'state', jsonb_array_length(t -> 'recent_runs')
                    FROM jsonb_array_elements(pgbus.deploy_tasks_overview(recent => 1) -> 'deploy_tasks') t$$,
                  $$VALUES ('backfill'::text, 'enqueued'::text, 1), ('warm', 'disabled', 1)$$,
                  'overview: each task with its state and its latest runs');
SELECT is(pgbus.deploy_tasks_overview() -> 'deploy_tasks' -> 0 -> 'recent_runs' -> 0 ->> 'arm', 'version:3',
          'overview: the newest run first');

SELECT * FROM finish();
ROLLBACK;
