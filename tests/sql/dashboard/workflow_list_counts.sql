-- pgTAP tests: the run list's total (pgbus.workflow_list_count) counts exactly the runs the
-- list shows (pgbus.workflow_list, every page through its keyset cursor) for the current-step
-- filter alone and combined with each status, a class and an error class; capped, it stops at
-- the cap.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(29);

SELECT pgbus.workflow_register('t_wlc_a', '[{"name": "charge"}, {"name": "receipt"}]', 'd1', 't_wlc_a');
SELECT pgbus.workflow_register('t_wlc_b', '[{"name": "charge"}, {"name": "ship"}]', 'd1', 't_wlc_b');
CREATE TEMP TABLE t_ids (tag text, id uuid);

-- t_wlc_a: three paused on an error at charge, two running charge, two past charge (ready at
-- receipt), one paused by hand while running charge, one cancelled while running charge, one
-- finished. t_wlc_b: two ready at charge.
INSERT INTO t_ids SELECT 'a' || lpad(i::text, 2, '0'), (pgbus.workflow_start('t_wlc_a', actor => 't')).workflow_id
FROM generate_series(1, 10) i;
CREATE TEMP TABLE t_step AS
SELECT i.tag, (r.context ->> 'step_id')::bigint AS step_id
FROM pgbus.read_jobs(ARRAY['t_wlc_a'], 30, 20, 'host:1', 'rev1') r
JOIN t_ids i ON i.id = (r.context ->> 'workflow_id')::uuid;
SELECT is((SELECT count(*)::int FROM t_step), 10, 'setup: the ten runs'' attempts of charge begin');
SELECT count(*) FROM (SELECT pgbus.workflow_end_step(step_id, 'pause', error => '{"class": "ValueError", "message": "declined"}')
                      FROM t_step WHERE tag IN ('a01', 'a02', 'a03')) x;
SELECT pgbus.workflow_end_step((SELECT step_id FROM t_step WHERE tag = 'a10'), 'complete');
SELECT is((SELECT count(*)::int FROM (
              SELECT pgbus.workflow_end_step((r.context ->> 'step_id')::bigint, 'complete')
              FROM pgbus.read_jobs(ARRAY['t_wlc_a'], 30, 20, 'host:1', 'rev1') r) x), 1,
          'setup: the one run past charge runs receipt to its end');
SELECT count(*) FROM (SELECT pgbus.workflow_end_step(step_id, 'complete') FROM t_step WHERE tag IN ('a06', 'a07')) x;
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'a08'), 'pause', 'ops');
SELECT pgbus.workflow_command((SELECT id FROM t_ids WHERE tag = 'a09'), 'cancel', 'ops');
INSERT INTO t_ids SELECT 'b' || i, (pgbus.workflow_start('t_wlc_b', actor => 't')).workflow_id FROM generate_series(1, 2) i;
SELECT is((SELECT array_agg(w.status || ':' || coalesce(w.current_step, '-') ORDER BY i.tag)
           FROM t_ids i JOIN pgbus.workflows w ON w.workflow_id = i.id),
          ARRAY['paused:charge', 'paused:charge', 'paused:charge', 'running:charge', 'running:charge',
                'ready:receipt', 'ready:receipt', 'paused:charge', 'cancelled:charge', 'finished:receipt',
                'ready:charge', 'ready:charge'],
          'setup: the runs stand where meant');

-- Every run the list shows for the filters, over every page (3 a page), each page read after
-- the last run of the one before (the keyset cursor).
CREATE FUNCTION pg_temp.listed(st text, step text, cls text DEFAULT NULL, err text DEFAULT NULL) RETURNS uuid[]
LANGUAGE plpgsql AS $f$
DECLARE
    seen uuid[] := '{}';
    r record;
    at timestamptz;
    id uuid;
    got int;
BEGIN
    LOOP
        got := 0;
        FOR r IN SELECT l.workflow_id, l.created_at
                 FROM pgbus.workflow_list(st, only_class => cls, only_step => step, only_error_class => err,
                                          before_created => at, before_id => id, page_size => 3) l LOOP
            seen := seen || r.workflow_id;
            at := r.created_at;
            id := r.workflow_id;
            got := got + 1;
        END LOOP;
        EXIT WHEN got < 3;
    END LOOP;
    RETURN seen;
END;
$f$;
-- The same runs by the plain conditions, newest first.
CREATE FUNCTION pg_temp.plain(st text, step text, cls text DEFAULT NULL, err text DEFAULT NULL) RETURNS uuid[]
LANGUAGE sql AS $f$
    SELECT coalesce(array_agg(w.workflow_id ORDER BY w.created_at DESC, w.workflow_id DESC), '{}')
    FROM pgbus.workflows w
    WHERE w.current_step = step AND (cls IS NULL OR w.workflow_class = cls) AND (err IS NULL OR w.error_class = err)
      AND CASE st WHEN 'ongoing' THEN w.status NOT IN ('finished', 'cancelled') WHEN 'all' THEN true ELSE w.status = st END
$f$;
CREATE FUNCTION pg_temp.counted(st text, step text, cls text DEFAULT NULL, err text DEFAULT NULL, cap int DEFAULT 10000) RETURNS jsonb
LANGUAGE sql AS $f$
    SELECT pgbus.workflow_list_count(st, only_class => cls, only_step => step, only_error_class => err, cap => cap)
$f$;

SELECT is(pg_temp.counted('ongoing', 'charge'), '{"count": 8, "capped": false}', 'step: counts the ongoing runs at the step');
SELECT is(pg_temp.listed('ongoing', 'charge'), pg_temp.plain('ongoing', 'charge'), 'step: the list shows exactly those');
SELECT is(pg_temp.counted('all', 'charge'), '{"count": 9, "capped": false}', 'step, status=all: counts the cancelled run too');
SELECT is(pg_temp.listed('all', 'charge'), pg_temp.plain('all', 'charge'), 'step, status=all: the list shows exactly those');
SELECT is(pg_temp.counted('paused', 'charge'), '{"count": 4, "capped": false}', 'step, paused: on an error and by hand');
SELECT is(pg_temp.listed('paused', 'charge'), pg_temp.plain('paused', 'charge'), 'step, paused: the list shows exactly those');
SELECT is(pg_temp.counted('running', 'charge'), '{"count": 2, "capped": false}', 'step, running');
SELECT is(pg_temp.listed('running', 'charge'), pg_temp.plain('running', 'charge'), 'step, running: the list shows exactly those');
SELECT is(pg_temp.counted('ready', 'charge'), '{"count": 2, "capped": false}', 'step, ready');
SELECT is(pg_temp.listed('ready', 'charge'), pg_temp.plain('ready', 'charge'), 'step, ready: the list shows exactly those');
SELECT is(pg_temp.counted('ready', 'receipt'), '{"count": 2, "capped": false}', 'another step, ready');
SELECT is(pg_temp.listed('ready', 'receipt'), pg_temp.plain('ready', 'receipt'), 'another step, ready: the list shows exactly those');
SELECT is(pg_temp.counted('finished', 'receipt'), '{"count": 1, "capped": false}', 'step, finished (the step it ended on)');
SELECT is(pg_temp.listed('finished', 'receipt'), pg_temp.plain('finished', 'receipt'), 'step, finished: the list shows exactly those');
SELECT is(pg_temp.counted('cancelled', 'charge'), '{"count": 1, "capped": false}', 'step, cancelled');
SELECT is(pg_temp.listed('cancelled', 'charge'), pg_temp.plain('cancelled', 'charge'), 'step, cancelled: the list shows exactly those');
SELECT is(pg_temp.counted('ongoing', 'charge', 't_wlc_a'), '{"count": 6, "capped": false}', 'step and class');
SELECT is(pg_temp.listed('ongoing', 'charge', 't_wlc_a'), pg_temp.plain('ongoing', 'charge', 't_wlc_a'), 'step and class: the list shows exactly those');
SELECT is(pg_temp.counted('ongoing', 'charge', NULL, 'ValueError'), '{"count": 3, "capped": false}', 'step and error class');
SELECT is(pg_temp.listed('ongoing', 'charge', NULL, 'ValueError'), pg_temp.plain('ongoing', 'charge', NULL, 'ValueError'),
          'step and error class: the list shows exactly those');
SELECT is(pg_temp.counted('ongoing', 'nope'), '{"count": 0, "capped": false}', 'a step no run is on');
SELECT is(pg_temp.listed('ongoing', 'nope'), '{}'::uuid[], 'a step no run is on: the list is empty');
SELECT is(pg_temp.counted('waiting', 'charge'), '{"count": 0, "capped": false}', 'step, waiting: none');
SELECT is(pg_temp.listed('waiting', 'charge'), '{}'::uuid[], 'step, waiting: the list is empty');
SELECT is(pg_temp.counted('ongoing', 'charge', cap => 5), '{"count": 5, "capped": true}', 'step, capped: stops at the cap');
SELECT is(pg_temp.counted('ongoing', 'charge', cap => 8), '{"count": 8, "capped": false}', 'step, at the cap exactly: not capped');

SELECT * FROM finish();
ROLLBACK;
