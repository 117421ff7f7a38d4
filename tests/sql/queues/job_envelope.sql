-- pgTAP tests for sql/functions/010_queues.sql: job_envelope.
-- (Split from queues.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(15);
\ir ../include/queues_setup.psql
-------------------------------------------------------------------------------------------------
-- job_envelope
-------------------------------------------------------------------------------------------------
INSERT INTO t_env VALUES
    ('plain', pgbus.job_envelope('t_queues_env', 'Mailer', '{"args": [1, "two"], "kwargs": {"k": "v"}}', NULL, NULL)),
    ('empty', pgbus.job_envelope('t_queues_env', 'Mailer', '{}', NULL, NULL)),
    ('null',  pgbus.job_envelope('t_queues_env', 'Mailer', NULL, NULL, NULL)),
    ('full',  pgbus.job_envelope('t_queues_env', 'Mailer', '{"args": []}', '2031-02-03 04:05:06+00',
                                 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')),
    ('nulls', pgbus.job_envelope('t_queues_env', 'Mailer',
                                 '{"args": [null, {"a": null}], "kwargs": {"note": null, "n": 1}}', NULL, NULL));

SELECT is((SELECT array_agg(k ORDER BY k) FROM t_env, jsonb_object_keys(env) k WHERE name = 'plain'),
          ARRAY['args', 'enqueued_at', 'job_class', 'job_id', 'kwargs', 'queue'],
          'job_envelope: without run_at and batch_id it has exactly job_class, job_id, queue, args, kwargs, enqueued_at');
SELECT is((SELECT env ->> 'job_class' FROM t_env WHERE name = 'plain'), 'Mailer', 'job_envelope: carries the job class');
SELECT is((SELECT env ->> 'queue' FROM t_env WHERE name = 'plain'), 't_queues_env', 'job_envelope: carries the queue');
SELECT is((SELECT env -> 'args' FROM t_env WHERE name = 'plain'), '[1, "two"]'::jsonb, 'job_envelope: carries args');
SELECT is((SELECT env -> 'kwargs' FROM t_env WHERE name = 'plain'), '{"k": "v"}'::jsonb, 'job_envelope: carries kwargs');
SELECT is((SELECT (env ->> 'enqueued_at')::timestamptz FROM t_env WHERE name = 'plain'), now(),
          'job_envelope: enqueued_at is now()');
SELECT lives_ok($$SELECT (env ->> 'job_id')::uuid FROM t_env$$, 'job_envelope: job_id is a UUID');
SELECT is((SELECT count(DISTINCT env ->> 'job_id') FROM t_env), (SELECT count(*) FROM t_env),
          'job_envelope: every envelope gets its own job_id');
SELECT is((SELECT env -> 'args' FROM t_env WHERE name = 'empty'), '[]'::jsonb, 'job_envelope: missing args become []');
SELECT is((SELECT env -> 'kwargs' FROM t_env WHERE name = 'empty'), '{}'::jsonb, 'job_envelope: missing kwargs become {}');
SELECT is((SELECT jsonb_build_array(env -> 'args', env -> 'kwargs') FROM t_env WHERE name = 'null'), '[[], {}]'::jsonb,
          'job_envelope: NULL arguments give args [] and kwargs {}');
SELECT is((SELECT (env ->> 'scheduled_at')::timestamptz FROM t_env WHERE name = 'full'), '2031-02-03 04:05:06+00'::timestamptz,
          'job_envelope: scheduled_at is run_at');
SELECT is((SELECT env ->> 'batch_id' FROM t_env WHERE name = 'full'), 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
          'job_envelope: carries batch_id');
SELECT is((SELECT env -> 'args' FROM t_env WHERE name = 'nulls'), '[null, {"a": null}]'::jsonb,
          'job_envelope: null values inside args are kept as given');
SELECT is((SELECT env -> 'kwargs' FROM t_env WHERE name = 'nulls'), '{"note": null, "n": 1}'::jsonb,
          'job_envelope: null-valued kwargs are kept as given');

SELECT * FROM finish();
ROLLBACK;
