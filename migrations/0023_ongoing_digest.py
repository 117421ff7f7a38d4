"""The ongoing runs' index carries their definition digest (the insights list reads no run)."""

from pgbus.migrate import schema_step

steps = [schema_step("0023_ongoing_digest.sql")]
__depends__ = {"0019_insights_spans"}
