"""The dashboard: paused queues, the operator audit log, failed-jobs paging."""

from pgbus.migrate import schema_step

steps = [schema_step("0009_dashboard.sql")]
__depends__ = {"0005_waiting_steps"}  # independent of 0010_scheduler: applied in number order
