"""`pgbus demo`: the sample workload, with visible progress."""

from __future__ import annotations

import argparse
import json

from pgbus import migrate
from pgbus.config import settings
from pgbus.db import connect, redact


def run(args: argparse.Namespace) -> int:
    dsn = settings().dsn()
    print(f"pgbus demo on {redact(dsn)}", flush=True)
    for line in migrate.migrate(dsn).lines():
        print(f"  {line}", flush=True)
    with connect(dsn) as conn:
        conn.execute("SELECT pgmq.create('pgbus_demo')")
        msg_id = conn.execute(
            "SELECT * FROM pgmq.send('pgbus_demo', %s::jsonb)", (json.dumps({"hello": "world"}),)
        ).fetchone()[0]
        print(f"  sent message {msg_id} to pgbus_demo", flush=True)
        row = conn.execute("SELECT msg_id, message FROM pgmq.read('pgbus_demo', 30, 1)").fetchone()
        print(f"  read message {row[0]}: {json.dumps(row[1])}", flush=True)
        conn.execute("SELECT pgmq.archive('pgbus_demo', %s::bigint)", (row[0],))
        print(f"  archived message {row[0]}: round trip done", flush=True)
    return 0
