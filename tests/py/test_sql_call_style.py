"""Python's calls of pgbus's SQL functions name their arguments (`queue => %s`): a positional
list of placeholders breaks silently when a signature changes, and cannot be read. Every call
with two or more arguments in the package's sources is checked, and every name it uses must be
one of the function's argument names in the migrated schema."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

from tests.py.support import ROOT

SOURCES = ["pgbus", "web", "mcp_server"]
# pgbus.fn( ... ) inside one string literal (calls split over literals are joined first).
CALL = re.compile(r"pgbus\.(\w+)\(((?:[^()]|\(\))*)\)")  # (an argument may be now())
NAMED = re.compile(r"^\s*(\w+)\s*=>")


def python_sources() -> list[Path]:
    return [p for folder in SOURCES for p in sorted((ROOT / folder).rglob("*.py"))]


def joined_literals(text: str) -> str:
    """The source with adjacent string literals joined ("a" "b" -> "ab"), so that a call split
    over lines reads as one."""
    return re.sub(r"\"\s*\n\s*(?:f|rf|fr)?\"", "", text)


def calls(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for m in CALL.finditer(joined_literals(text)):
        args = [a.strip() for a in m.group(2).split(",") if a.strip()]
        if "%s" in m.group(2) or "%(" in m.group(2):  # (a call the code makes, not prose)
            found.append((m.group(1), args))
    return found


def test_the_check_finds_positional_and_named_calls():
    text = '"SELECT pgbus.f(%s, %s::bigint)", "SELECT pgbus.g(a => %s," \n " b => %s)"'
    assert calls(text) == [("f", ["%s", "%s::bigint"]), ("g", ["a => %s", "b => %s"])]


def test_multi_argument_sql_calls_name_their_arguments(conn: psycopg.Connection):
    names = {}
    for fn, args in conn.execute(
        "SELECT proname, proargnames FROM pg_proc WHERE pronamespace = 'pgbus'::regnamespace"
    ).fetchall():
        names.setdefault(fn, set()).update(args or ())
    positional, unknown = [], []
    for path in python_sources():
        for fn, args in calls(path.read_text()):
            where = f"{path.relative_to(ROOT)}: pgbus.{fn}({', '.join(args)})"
            if len(args) >= 2 and not all(NAMED.match(a) for a in args):
                positional.append(where)
            for a in args:
                m = NAMED.match(a)
                if m and m.group(1) not in names.get(fn, set()):
                    unknown.append(f"{where}: no argument {m.group(1)}")
    assert positional == [], "positional arguments:\n" + "\n".join(positional)
    assert unknown == [], "\n".join(unknown)


TABLE_READ = re.compile(
    r"\b(?:FROM|JOIN)\s+pgbus\.(workflows|workflow_steps|workflow_events|workflow_signals)\b",
    re.IGNORECASE,
)


def test_python_reads_workflow_state_through_the_read_layer():
    """Runs, attempts, events and signals are read through pgbus's views and functions
    (sql/views/020_workflow_read_layer.sql and the functions), the one read path the
    dashboard, the MCP server, metrics and the Python API share; never from the tables."""
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in python_sources()
        for m in TABLE_READ.finditer(joined_literals(path.read_text()))
    ]
    assert found == [], "\n".join(found)
