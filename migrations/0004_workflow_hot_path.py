"""Workflows: cheaper writes on the step hot path (CHECKs in one function, HOT-friendly indexes)."""

from pgbus.migrate import schema_step

steps = [schema_step("0004_workflow_hot_path.sql")]
__depends__ = {"0003_workflows"}
