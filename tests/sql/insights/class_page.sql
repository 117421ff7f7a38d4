-- pgTAP tests for pgbus.workflow_class_page (sql/functions/520_workflow_class_insights.sql):
-- every block of a class's page in one call, each what its own function answers.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(6);
\ir ../include/insights_setup.psql

CREATE TEMP TABLE pg AS SELECT pgbus.workflow_class_page('ins.Shop', '7d', 'Europe/Berlin') AS j;
SELECT is((SELECT j -> 'steps' FROM pg), pgbus.workflow_class_steps('ins.Shop', '7d', max_revisions => 5), 'steps (with revisions)');
SELECT is((SELECT j -> 'throughput' FROM pg), pgbus.workflow_class_throughput('ins.Shop', '7d', 'Europe/Berlin'), 'throughput, in the zone given');
SELECT is((SELECT j -> 'durations' FROM pg), pgbus.workflow_class_durations('ins.Shop', '7d'), 'durations');
SELECT is((SELECT j -> 'funnel' FROM pg), pgbus.workflow_class_funnel('ins.Shop', '7d'), 'funnel');
SELECT is(pgbus.workflow_class_page('ins.Nope'), NULL, 'a name no definition or run has: NULL');
SELECT throws_ok($$SELECT pgbus.workflow_class_page('ins.Shop', '5d')$$, '22023', NULL, 'an unknown window raises 22023');

SELECT * FROM finish();
ROLLBACK;
