"""The run's current error class on the run row, indexes for the attention page and the stuck
gauge, and the dashboard's cache of big queues' counts."""

from pgbus.migrate import schema_step

steps = [schema_step("0015_page_facts.sql")]
__depends__ = {"0013_workflow_insights"}
