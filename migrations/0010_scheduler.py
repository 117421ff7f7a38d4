"""Recurring tasks, deploy tasks and their run history; the scheduler process kind."""

from pgbus.migrate import schema_step

steps = [schema_step("0010_scheduler.sql")]
__depends__ = {"0005_waiting_steps"}
