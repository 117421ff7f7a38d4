"""The dashboard: paused queues, the operator audit log, failed-jobs paging."""

from pgbus.migrate import schema_step

steps = [schema_step("0009_dashboard.sql")]
__depends__ = {"0008_sql_api"}
