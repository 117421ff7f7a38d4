"""The workflow insights' rollup of closed hours (runs and attempts that ended in each), so that
a 7- or 30-day window reads a few thousand rolled-up rows instead of every attempt."""

from pgbus.migrate import schema_step

steps = [schema_step("0018_workflow_insights_rollup.sql")]
__depends__ = {"0015_page_facts"}
