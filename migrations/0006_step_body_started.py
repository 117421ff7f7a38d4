"""Step attempts: when the step's body started (a read-ahead attempt that never started is not
a stall when its message comes back)."""

from pgbus.migrate import schema_step

steps = [schema_step("0006_step_body_started.sql")]
__depends__ = {"0009_dashboard"}
