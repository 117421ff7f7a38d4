"""Settings SQL reads, and the payload, actor and reason limits enforced in SQL."""

from pgbus.migrate import schema_step

steps = [schema_step("0008_sql_api.sql")]
__depends__ = {"0010_scheduler"}
