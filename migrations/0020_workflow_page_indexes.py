"""Indexes for the run list's paused and error-class filters (newest first, counted alone)."""

from pgbus.migrate import schema_step

steps = [schema_step("0020_workflow_page_indexes.sql")]
__depends__ = {"0017_stuck_run_lookup"}
