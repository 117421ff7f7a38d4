"""ApexCharts options for the insights pages, each with the table of the same numbers.

The server builds the options (data only: no functions, so they travel as JSON in a
`data-chart` attribute); static/pgbus.js draws them. Every chart has a caption and a table.
"""

from __future__ import annotations

from typing import Any

STATUS_COLOURS = {"success": "#1a7f37", "failed": "#b35900", "dead_lettered": "#cf222e"}
STATUS_LABELS = {"success": "Succeeded", "failed": "Failed", "dead_lettered": "Dead-lettered"}


def _label(at: str, bucket_seconds: int) -> str:
    # "2026-12-01T11:12:00+00:00" -> "11:12" within a day's buckets, else "12-01 11:00"
    date, _, time = at.partition("T")
    hm = time[:5]
    return hm if bucket_seconds < 3600 else f"{date[5:]} {hm}"


def job_charts(data: dict[str, Any]) -> list[dict[str, Any]]:
    buckets = data["buckets"]
    step = int(data["bucket_seconds"])
    labels = [_label(b["at"], step) for b in buckets]
    period = data["period"]
    statuses = ("success", "failed", "dead_lettered")
    throughput = {
        "id": "throughput",
        "caption": f"Executions per {step // 60} min over {period}, by outcome",
        "options": {
            "chart": {
                "type": "bar",
                "stacked": True,
                "height": 260,
                "animations": {"enabled": False},
            },
            "series": [
                {"name": STATUS_LABELS[s], "data": [b[s] for b in buckets]} for s in statuses
            ],
            "colors": [STATUS_COLOURS[s] for s in statuses],
            "xaxis": {"categories": labels, "tickAmount": 12},
            "dataLabels": {"enabled": False},
        },
        "table": {
            "head": ["Time", *(STATUS_LABELS[s] for s in statuses)],
            "rows": [
                [lbl, *(b[s] for s in statuses)]
                for lbl, b in zip(labels, buckets, strict=True)
                if any(b[s] for s in statuses)
            ],
        },
    }
    counts = data["status_counts"]
    split = {
        "id": "status-split",
        "caption": f"Outcomes over {period}",
        "options": {
            "chart": {"type": "donut", "height": 260, "animations": {"enabled": False}},
            "series": [counts[s] for s in statuses],
            "labels": [STATUS_LABELS[s] for s in statuses],
            "colors": [STATUS_COLOURS[s] for s in statuses],
        },
        "table": {
            "head": ["Outcome", "Executions"],
            "rows": [[STATUS_LABELS[s], counts[s]] for s in statuses],
        },
    }
    latency = {
        "id": "latency",
        "caption": f"Enqueue latency (enqueued to started) p50 and p95 in ms over {period}",
        "options": {
            "chart": {"type": "line", "height": 260, "animations": {"enabled": False}},
            "series": [
                {"name": "p50", "data": [b["latency_p50_ms"] for b in buckets]},
                {"name": "p95", "data": [b["latency_p95_ms"] for b in buckets]},
            ],
            "colors": ["#0969da", "#8250df"],
            "xaxis": {"categories": labels, "tickAmount": 12},
            "yaxis": {"title": {"text": "ms"}},
            "stroke": {"width": 2},
        },
        "table": {
            "head": ["Time", "p50 (ms)", "p95 (ms)"],
            "rows": [
                [lbl, b["latency_p50_ms"], b["latency_p95_ms"]]
                for lbl, b in zip(labels, buckets, strict=True)
                if b["latency_p50_ms"] is not None
            ],
        },
    }
    return [throughput, split, latency]
