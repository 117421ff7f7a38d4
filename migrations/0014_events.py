"""The event bus: processed events (idempotent handlers), consumer processes."""

from pgbus.migrate import schema_step

steps = [schema_step("0014_events.sql")]
__depends__ = {"0011_workflow_pages"}
