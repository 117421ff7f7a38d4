"""The workflow insights' spans: the rolled-up hours of the last 24 h, 7 d and 30 d merged once
per closed hour (sorted values per class, step and revision), and the type of the exact
percentile functions that read them beside a window's other hours and live ends."""

from pgbus.migrate import schema_step

steps = [schema_step("0019_insights_spans.sql")]
__depends__ = {"0020_workflow_page_indexes"}
