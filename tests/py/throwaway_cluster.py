"""A PostgreSQL cluster of a test's own, on a free port: for tests that restart, kill or stop
the server (the shared test server must never go down under other tests).

    with ThrowawayCluster() as cluster:        # initdb + start, removed on exit
        url = cluster.create_database("app")   # migrated with pgbus db migrate
        cluster.restart(mode="immediate")      # or stop()/start(), kill()
        ...

As root the server runs as the `postgres` system user (initdb and postgres refuse root); the
clients stay whoever runs the test. Durability is off (fsync, full_page_writes): a crash of
the server process (`-m immediate`) still runs crash recovery from WAL, which is what the tests
exercise; only an operating-system crash would need fsync. `synchronous_commit` stays on unless
`fast=True`, so that a commit that returned survives `-m immediate`.

Pytest fixture: `throwaway_cluster` in conftest.py (one cluster per test, removed after).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[2]


def _bindir() -> str:
    """The folder of initdb, pg_ctl and postgres, as scripts/pg finds it."""
    out = subprocess.run(
        [str(ROOT / "scripts/pg"), "bindir"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayCluster:
    def __init__(self, *, fast: bool = False, settings: dict[str, str] | None = None) -> None:
        self.bindir = _bindir()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="pgbus-cluster-"))
        self.data = self.root / "data"
        self.sock = self.root / "run"
        self.log = self.root / "server.log"
        self.as_root = os.geteuid() == 0
        self.settings = {
            "listen_addresses": "127.0.0.1",
            "max_connections": "200",
            "fsync": "off",
            "full_page_writes": "off",
            **({"synchronous_commit": "off"} if fast else {}),
            **(settings or {}),
        }
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._created = False

    # -- lifecycle -----------------------------------------------------------------------

    def _as_owner(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        cmd = list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed: {out.stderr.strip()}\n{tail}")
        return out.stdout

    def create(self) -> ThrowawayCluster:
        self.sock.mkdir(parents=True)
        self.log.touch()
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
            shutil.chown(self.log, "postgres", "postgres")
        self._as_owner(
            f"{self.bindir}/initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        self._created = True
        self.start()
        return self

    def _options(self) -> str:
        opts = [f"-p {self.port}", f"-k {self.sock}"]
        opts += [f"-c {k}={v}" for k, v in self.settings.items()]
        return " ".join(opts)

    def start(self) -> None:
        self._as_owner(
            f"{self.bindir}/pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            self._options(),
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """mode: smart, fast or immediate (immediate: no checkpoint, crash recovery at start)."""
        self._as_owner(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def running(self) -> bool:
        cmd = [f"{self.bindir}/pg_ctl", "-D", str(self.data), "status"]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True).returncode == 0

    def kill(self) -> None:
        """SIGKILL the postmaster (its backends exit on their own): nobody restarts it."""
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().splitlines()[0])
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.05)

    def remove(self) -> None:
        if self._created and self.running():
            try:
                self.stop("immediate")
            except (RuntimeError, subprocess.TimeoutExpired):
                self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ThrowawayCluster:
        try:
            return self.create()
        except BaseException:
            self.remove()
            raise

    def __exit__(self, *exc: object) -> None:
        self.remove()

    # -- databases -----------------------------------------------------------------------

    def url(self, dbname: str) -> str:
        return urlunsplit(urlsplit(self.admin_url)._replace(path="/" + dbname))

    def create_database(self, name: str = "pgbus", *, migrate: bool = True) -> str:
        """A new database (migrated with pgbus's migrations unless migrate=False); its URL."""
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        url = self.url(name)
        if migrate:
            from pgbus import migrate as migrations

            migrations.migrate(url)
        return url

    def wait_ready(self, timeout: float = 30) -> None:
        """Until the server accepts connections (after crash recovery)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.admin_url, connect_timeout=2) as c:
                    c.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
