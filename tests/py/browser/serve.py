"""The app the browser tests serve with uvicorn (`--factory tests.py.browser.serve:app`)."""

from __future__ import annotations

import os


def app():
    from pgbus.web import create_app

    return create_app(
        database_url=os.environ["PGBUS_DATABASE_URL"],
        refresh_interval_ms=int(os.environ.get("PGBUS_TEST_REFRESH_MS", "5000")),
    )
