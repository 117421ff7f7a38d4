"""Indexes for the dashboard's workflow pages (the list's keyset paging and filters)."""

from pgbus.migrate import schema_step

steps = [schema_step("0011_workflow_pages.sql")]
__depends__ = {"0006_step_body_started"}
