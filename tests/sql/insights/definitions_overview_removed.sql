-- pgTAP tests for sql/functions/510_workflow_definitions_overview.sql: which ongoing runs it
-- reads to find those on removed steps. A run that started on the class's current definition
-- after that definition was registered can only be at one of its live steps, so only the
-- others are read: runs created before the registration (whatever their digest: a definition
-- may come back after another one moved them on, as in a rolled-back deploy) and runs that
-- carry another digest (they read the definition before the new one committed).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(8);

\o /dev/null
-- A run of class t_rm at `step`, carrying `digest`, created at `created`. (The overview is read
-- as of the clock: runs created after this transaction began count.)
CREATE FUNCTION pg_temp.run(step text, digest text, created timestamptz) RETURNS uuid LANGUAGE sql AS $f$
    INSERT INTO pgbus.workflows (workflow_class, status, current_step, definition_digest, created_at, updated_at)
    VALUES ('t_rm', 'ready', step, digest, created, created)
    RETURNING workflow_id
$f$;
CREATE FUNCTION pg_temp.removed() RETURNS text LANGUAGE sql AS $f$
    SELECT row(ongoing, on_removed_steps, removed_steps)::text
    FROM pgbus.workflow_definitions_overview(as_of => clock_timestamp()) WHERE workflow_class = 't_rm'
$f$;
CREATE FUNCTION pg_temp.register(steps text[], digest text) RETURNS text LANGUAGE sql AS $f$
    SELECT pgbus.workflow_register('t_rm', (SELECT jsonb_agg(jsonb_build_object('name', s)) FROM unnest(steps) s),
                                   digest, 'q')
$f$;
\o

-- Definition v1 (a, b); a run started on it before the next deploy, now at b.
SELECT pg_temp.register(ARRAY['a', 'b'], 'v1');
SELECT ok((SELECT registered_at > now() FROM pgbus.workflow_definitions WHERE workflow_class = 't_rm'),
          'registered_at is the clock''s time of the registration, not the transaction''s start');
SELECT pg_temp.run('b', 'v1', now() - interval '1 hour');
-- v2 (a, x, b) is deployed: the run moves on to x, and a new run starts on v2 at x.
CREATE TEMP TABLE t_reg AS SELECT registered_at AS v1_at FROM pgbus.workflow_definitions WHERE workflow_class = 't_rm';
SELECT pg_temp.register(ARRAY['a', 'x', 'b'], 'v2');
SELECT ok((SELECT registered_at > t_reg.v1_at FROM pgbus.workflow_definitions, t_reg WHERE workflow_class = 't_rm'),
          'a new digest moves registered_at on');
UPDATE pgbus.workflows SET current_step = 'x' WHERE workflow_class = 't_rm';
SELECT pg_temp.run('x', 'v2', clock_timestamp());
SELECT is(pg_temp.removed(), row(2::bigint, 0::bigint, '{}'::text[])::text, 'on v2 both runs are at live steps');

-- The deploy is rolled back: v1 again. Both runs are at x, removed now; the older one carries
-- v1, the digest of the current definition, and is counted all the same.
SELECT pg_temp.register(ARRAY['a', 'b'], 'v1');
SELECT is(pg_temp.removed(), row(2::bigint, 2::bigint, ARRAY['x'])::text,
          'after a definition comes back, runs created before it are read whatever their digest');
-- Registering the same definition again changes nothing.
UPDATE t_reg SET v1_at = (SELECT registered_at FROM pgbus.workflow_definitions WHERE workflow_class = 't_rm');
SELECT pg_temp.register(ARRAY['a', 'b'], 'v1');
SELECT is((SELECT registered_at FROM pgbus.workflow_definitions WHERE workflow_class = 't_rm'), (SELECT v1_at FROM t_reg),
          'registering the same digest keeps registered_at');

-- Created after the registration: a run that read v2 before v1 came back (another digest) is
-- read; one that started on v1 is not (it can only be at a live step: a and b).
SELECT pg_temp.run('x', 'v2', clock_timestamp());
SELECT is(pg_temp.removed(), row(3::bigint, 3::bigint, ARRAY['x'])::text,
          'a run created after the registration with another digest is read');
SELECT pg_temp.run('a', 'v1', clock_timestamp());
SELECT pg_temp.run('zz', 'v1', clock_timestamp());
SELECT is(pg_temp.removed(), row(5::bigint, 3::bigint, ARRAY['x'])::text,
          'runs that started on the current definition after its registration are not read');
-- A run created in the future (after as_of) is not counted, on a removed step or not.
SELECT pg_temp.run('x', 'v2', now() + interval '1 hour');
SELECT is(pg_temp.removed(), row(5::bigint, 3::bigint, ARRAY['x'])::text, 'a run created after as_of is not counted');

SELECT * FROM finish();
ROLLBACK;
