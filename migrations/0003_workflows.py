"""Durable workflows: definitions, runs, step attempts, the audit trail."""

from pgbus.migrate import schema_step

steps = [schema_step("0003_workflows.sql")]
__depends__ = {"0002_jobs"}
