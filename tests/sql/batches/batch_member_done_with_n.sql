-- pgTAP tests for sql/functions/020_batches.sql: batch_member_done with n: several members counted at once.
-- (Split from batches.sql; its shared set-up comes first.)
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(39);
\ir ../include/batches_setup.psql
-------------------------------------------------------------------------------------------------
-- batch_member_done with n: several members counted at once.
-------------------------------------------------------------------------------------------------
INSERT INTO t_b VALUES ('many', pg_temp.open('many'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('many'))), 5::bigint, 'many: five jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('many')), false, 'many: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'completed', 2), false, 'batch_member_done n: two completed at once, not finished');
SELECT is(pg_temp.counts('many'), '5 total, 2 completed, 0 discarded, processing', 'batch_member_done n: counts 2 completed');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'discarded', n => 2), false, 'batch_member_done n: two discarded at once, not finished');
SELECT is(pg_temp.counts('many'), '5 total, 2 completed, 2 discarded, processing', 'batch_member_done n: counts 2 discarded');
SELECT is(pg_temp.sent_all('many'), ARRAY[0, 0, 0]::bigint[], 'batch_member_done n: no callbacks before the sum reaches total');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'completed', 1), true,
          'batch_member_done n: the call that makes the sum reach total finishes the batch (true)');
SELECT is(pg_temp.counts('many'), '5 total, 3 completed, 2 discarded, finished', 'batch_member_done n: counters at finish');
SELECT is(pg_temp.sent_all('many'), ARRAY[1, 0, 1]::bigint[], 'batch_member_done n: on_complete and on_discard, not on_success');
SELECT is(pgbus.batch_member_done(pg_temp.b('many'), 'completed', 2), false, 'batch_member_done n: a finished batch counts nothing more (false)');
SELECT is(pgbus.batch_finish_if_done(pg_temp.b('many')), false, 'batch_member_done n: the batch is not finished again');
SELECT is(pg_temp.counts('many'), '5 total, 3 completed, 2 discarded, finished', 'batch_member_done n: finished counters unchanged');
SELECT is(pg_temp.sent_all('many'), ARRAY[1, 0, 1]::bigint[], 'batch_member_done n: callbacks still sent once');

-- Every member in one call.
INSERT INTO t_b VALUES ('manyall', pg_temp.open('manyall'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('manyall'))), 3::bigint, 'manyall: three jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('manyall')), false, 'manyall: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('manyall'), 'completed', 3), true, 'batch_member_done n: n = total finishes at once (true)');
SELECT is(pg_temp.counts('manyall'), '3 total, 3 completed, 0 discarded, finished', 'batch_member_done n: all three counted');
SELECT is(pg_temp.sent_all('manyall'), ARRAY[1, 1, 0]::bigint[], 'batch_member_done n: on_complete and on_success, once');
INSERT INTO t_b VALUES ('manydisc', pg_temp.open('manydisc'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('manydisc'))), 2::bigint, 'manydisc: two jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('manydisc')), false, 'manydisc: close with pending members');
SELECT is(pgbus.batch_member_done(pg_temp.b('manydisc'), 'discarded', 2), true, 'batch_member_done n: all discarded at once finishes (true)');
SELECT is(pg_temp.counts('manydisc'), '2 total, 0 completed, 2 discarded, finished', 'batch_member_done n: both counted as discarded');
SELECT is(pg_temp.sent_all('manydisc'), ARRAY[1, 0, 1]::bigint[], 'batch_member_done n: on_complete and on_discard, once');

-- While the batch is open: counted, finished at close.
INSERT INTO t_b VALUES ('manyearly', pg_temp.open('manyearly'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}', '{}']::jsonb[], NULL,
                                              pg_temp.b('manyearly'))), 3::bigint, 'manyearly: three jobs enqueued in the batch');
SELECT is(pgbus.batch_member_done(pg_temp.b('manyearly'), 'completed', 3), false,
          'batch_member_done n: reaching total while open does not finish');
SELECT is(pg_temp.counts('manyearly'), '3 total, 3 completed, 0 discarded, open', 'batch_member_done n: counted while open');
SELECT is(pgbus.batch_close(pg_temp.b('manyearly')), true, 'batch_member_done n: the batch finishes at close');
SELECT is(pg_temp.sent_all('manyearly'), ARRAY[1, 1, 0]::bigint[], 'batch_member_done n: callbacks sent once at close');

-- n must be at least 1.
INSERT INTO t_b VALUES ('refusen', pg_temp.open('refusen'));
SELECT is((SELECT count(*) FROM pgbus.enqueue('t_batches_work', 'Work', ARRAY['{}', '{}']::jsonb[], NULL, pg_temp.b('refusen'))),
          2::bigint, 'refusen: two jobs enqueued in the batch');
SELECT is(pgbus.batch_close(pg_temp.b('refusen')), false, 'refusen: close with pending members');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'completed', 0)$$, pg_temp.b('refusen')), '22023',
                 'pgbus: batch_member_done counts at least one member, got 0', 'batch_member_done: refuses n = 0');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'completed', -1)$$, pg_temp.b('refusen')), '22023', NULL,
                 'batch_member_done: refuses a negative n');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'completed', NULL)$$, pg_temp.b('refusen')), '22023', NULL,
                 'batch_member_done: refuses a NULL n');
SELECT throws_ok(format($$SELECT pgbus.batch_member_done(%L, 'discarded', 0)$$, pg_temp.b('refusen')), '22023', NULL,
                 'batch_member_done: refuses n = 0 for discards too');
SELECT throws_ok($$SELECT pgbus.batch_member_done('00000000-0000-0000-0000-000000000000', 'completed', 0)$$, '22023', NULL,
                 'batch_member_done: refuses n = 0 even for a batch that is gone');
SELECT is(pg_temp.counts('refusen'), '2 total, 0 completed, 0 discarded, processing', 'batch_member_done: a refused n counts nothing');
SELECT is(pg_temp.sent_all('refusen'), ARRAY[0, 0, 0]::bigint[], 'batch_member_done: a refused n sends no callbacks');
SELECT is(pgbus.batch_member_done(pg_temp.b('refusen'), 'completed', 2), true, 'batch_member_done: after the refusals, n = 2 finishes it');

SELECT * FROM finish();
ROLLBACK;
