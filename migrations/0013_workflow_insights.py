"""An index for the workflow insights: runs by class and by when they ended."""

from pgbus.migrate import schema_step

steps = [schema_step("0013_workflow_insights.sql")]
__depends__ = {"0014_events"}
