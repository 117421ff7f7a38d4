"""`pgbus doctor`: is this database ready for pgbus, in a few plain lines."""

from __future__ import annotations

from dataclasses import dataclass

from pgbus import migrate
from pgbus.db import connect, redact


@dataclass
class Diagnosis:
    lines: list[str]
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def diagnose(dsn: str) -> Diagnosis:
    """Raises DatabaseUnreachable when the server cannot be reached."""
    with connect(dsn, timeout=5) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0]
    st = migrate.status(dsn)
    lines = [f"Database: {redact(dsn)}", f"PostgreSQL: {server}", *st.lines()]
    problem = None
    if st.pgmq_installed_as == "missing":
        problem = "PGMQ is not installed: run `pgbus db migrate`"
    elif st.pending:
        problem = f"{len(st.pending)} pending migration(s): run `pgbus db migrate`"
    elif not st.code_current:
        problem = "SQL functions and views are out of date: run `pgbus db migrate`"
    else:
        # The same verdict as the dashboard's /readyz and the MCP health tool.
        from pgbus.data import DataSource

        source = DataSource(dsn, max_connections=1)
        try:
            verdict = source.health()
        finally:
            source.close()
        lines.append(f"Health: {verdict['status']}")
        lines.extend(f"  - {reason}" for reason in verdict["reasons"])
        if verdict["status"] == "STALLED":
            problem = "work is stalled: " + "; ".join(verdict["reasons"])
    return Diagnosis(lines, problem)
