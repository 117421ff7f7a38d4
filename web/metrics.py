"""`/api/metrics` (Prometheus text, through prometheus_client) and `/readyz` (the health verdict)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from psycopg_pool import PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pgbus.data import DataSource


class PgbusCollector:
    """Reads the figures at scrape time, from the same read layer as the pages."""

    def __init__(self, data: DataSource) -> None:
        self.data = data

    def collect(self) -> Iterator[GaugeMetricFamily]:
        # Counted as the pages count (one pass over the queues for the figures, the summary
        # and the verdict): a queue above PAGE_COUNT_LIMIT messages reports PostgreSQL's
        # estimate of its depth and counts that stop at the limit, and says so in
        # pgbus_queue_counts_estimated; its figures may be reused for twice the refresh interval.
        overview = self.data.overview(reuse=True)
        queues = overview["queues"]
        summary = overview["summary"]
        verdict = overview["verdict"]
        per_queue: list[tuple[str, str, str]] = [
            ("pgbus_queue_depth", "Messages in the queue", "depth"),
            ("pgbus_queue_visible_depth", "Messages a worker may read now", "visible"),
            ("pgbus_queue_scheduled_depth", "Messages not yet due", "scheduled"),
            ("pgbus_queue_total_messages", "Messages ever sent to the queue", "total_messages"),
            (
                "pgbus_queue_oldest_message_age_seconds",
                "Age of the oldest message",
                "oldest_age_seconds",
            ),
            (
                "pgbus_queue_oldest_claimable_age_seconds",
                "How long the oldest visible message has waited",
                "oldest_claimable_age_seconds",
            ),
            ("pgbus_queue_paused", "1 when the queue is paused", "paused"),
            (
                "pgbus_queue_counts_estimated",
                "1 when the queue holds more messages than the dashboard counts: its depth is"
                " PostgreSQL's estimate and its visible count stopped at the limit",
                "counts_capped",
            ),
        ]
        for name, doc, key in per_queue:
            g = GaugeMetricFamily(name, doc, labels=["queue"])
            for q in queues:
                if q["is_dlq"] or q[key] is None:
                    continue
                g.add_metric([q["queue_name"]], float(q[key]))
            yield g
        dlq = GaugeMetricFamily(
            "pgbus_dlq_depth", "Messages in dead-letter queues", labels=["queue"]
        )
        for q in queues:
            if q["is_dlq"]:
                dlq.add_metric([q["queue_name"]], float(q["depth"]))
        yield dlq
        yield GaugeMetricFamily(
            "pgbus_failed_jobs", "Failed jobs waiting for a retry", value=float(summary["failed"])
        )
        procs = GaugeMetricFamily(
            "pgbus_processes", "pgbus processes by kind and status", labels=["kind", "status"]
        )
        counts: dict[tuple[str, str], int] = {}
        for p in self.data.processes():
            counts[(p["kind"], p["status"])] = counts.get((p["kind"], p["status"]), 0) + 1
        for (kind, status), n in sorted(counts.items()):
            procs.add_metric([kind, status], float(n))
        yield procs
        oldest = summary.get("oldest_transaction_age_seconds")
        yield GaugeMetricFamily(
            "pgbus_oldest_transaction_age_seconds",
            "Age of the oldest open transaction on the server",
            value=float(oldest or 0),
        )
        health = self.data.table_health()
        for name, doc, key in (
            ("pgbus_table_dead_tuples", "Dead tuples in a PGMQ table", "dead_tuples"),
            ("pgbus_table_live_tuples", "Live tuples in a PGMQ table", "live_tuples"),
            ("pgbus_table_bloat_ratio", "Dead share of a PGMQ table's tuples", "bloat_ratio"),
        ):
            g = GaugeMetricFamily(name, doc, labels=["table", "kind"])
            for t in health:
                g.add_metric([t["table_name"], t["kind"]], float(t[key] or 0))
            yield g
        h = GaugeMetricFamily("pgbus_health_status", "1 for the current verdict", labels=["status"])
        for status in ("OK", "DEGRADED", "STALLED"):
            h.add_metric([status], 1.0 if verdict["status"] == status else 0.0)
        yield h
        runs = GaugeMetricFamily(
            "pgbus_workflows",
            "Ongoing workflow runs by class and status",
            labels=["workflow_class", "status"],
        )
        for r in self.data.workflow_counts():
            runs.add_metric([r["workflow_class"], r["status"]], float(r["runs"]))
        yield runs


def endpoint(data: DataSource) -> Callable[[Request], Any]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PgbusCollector(data))

    async def metrics(request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return metrics


def readyz(data: DataSource) -> Callable[[Request], Any]:
    """200 for OK and DEGRADED, 503 for STALLED or when the database cannot answer."""

    async def ready(request: Request) -> Response:
        try:
            verdict = await run_in_threadpool(data.health, True)
        except (psycopg.Error, PoolTimeout):
            return JSONResponse(
                {"status": "ERROR", "reasons": ["the database is unavailable"]}, status_code=503
            )
        return JSONResponse(verdict, status_code=503 if verdict["status"] == "STALLED" else 200)

    return ready
