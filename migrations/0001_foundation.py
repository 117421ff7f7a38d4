"""The pgbus schema's bookkeeping table."""

from pgbus.migrate import schema_step

steps = [schema_step("0001_foundation.sql")]
