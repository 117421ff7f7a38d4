"""An index of ongoing runs by id, for the stuck-run classification's run look-ups."""

from pgbus.migrate import schema_step

steps = [schema_step("0017_stuck_run_lookup.sql")]
__depends__ = {"0018_workflow_insights_rollup"}
