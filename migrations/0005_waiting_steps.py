"""Waiting steps: what a parked attempt waits for, and the signals table."""

from pgbus.migrate import schema_step

steps = [schema_step("0005_waiting_steps.sql")]
__depends__ = {"0004_workflow_hot_path"}
