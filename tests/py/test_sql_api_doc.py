"""docs/sql-api.md's psql session, run through psql against a migrated database: the SQL API
as another language sees it drives a whole run."""

import re
import subprocess
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "sql-api.md"


def session() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- psql-session -->\n```sql\n(.*?)```", text, re.S)
    assert match, "docs/sql-api.md has no psql session"
    return match.group(1)


def test_the_documented_psql_session_drives_a_whole_run(db_url, conn):
    done = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db_url],
        input=session(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    status, events = conn.execute(
        "SELECT w.status, string_agg(e.event, ', ' ORDER BY e.event_id)"
        " FROM pgbus.workflows w JOIN pgbus.workflow_events e USING (workflow_id)"
        " WHERE w.workflow_class = 'docs.Checkout' GROUP BY w.status"
    ).fetchone()
    assert status == "finished"
    # The doc states the audit trail the session leaves: it is the one the run has.
    assert events in " ".join(DOC.read_text(encoding="utf-8").split())
    assert '"woke": true' in done.stdout and '"status": "finished"' in done.stdout
    assert conn.execute(
        "SELECT count(*) FROM pgbus.workflow_signals WHERE idempotency_key = 'evt_1'"
        " AND status = 'consumed'"
    ).fetchone() == (1,)
