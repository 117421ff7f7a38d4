"""The job layer: batches, failures, stats, processes."""

from pgbus.migrate import schema_step

steps = [schema_step("0002_jobs.sql")]
__depends__ = {"0001_foundation"}
