import logging

import pytest

from pgbus.config import configure, reset
from pgbus.reporting import report_error


@pytest.fixture(autouse=True)
def _defaults():
    reset()
    yield
    reset()


class BrokenHandler(logging.Handler):
    """A log handler that fails, as a misconfigured one in an app would."""

    def emit(self, record):
        raise OSError("log disk full")


def test_reporters_get_the_exception_and_a_copy_of_the_context():
    calls = []

    def meddler(exc, context):
        calls.append((exc, dict(context)))
        context["queue"] = "changed"

    configure(error_reporters=[meddler, lambda exc, context: calls.append((exc, context))])
    error = ValueError("bad input")
    context = {"queue": "default", "job_id": 7}
    report_error(error, context)

    assert calls == [(error, {"queue": "default", "job_id": 7})] * 2
    assert context == {"queue": "default", "job_id": 7}


def test_no_context_means_an_empty_dict():
    calls = []
    configure(error_reporters=[lambda exc, context: calls.append(context)])
    report_error(KeyError("x"))
    assert calls == [{}]


def test_the_error_is_logged_with_class_message_context_and_traceback(caplog):
    error = ValueError("bad input")
    with caplog.at_level(logging.ERROR, logger="pgbus"):
        report_error(error, {"queue": "default"})

    [record] = caplog.records
    assert record.name == "pgbus"
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "[pgbus] ValueError: bad input ({'queue': 'default'})"
    assert record.exc_info[1] is error


def test_a_raising_reporter_is_logged_and_the_others_still_run(caplog):
    calls = []

    def broken_reporter(exc, context):
        raise RuntimeError("reporter down")

    configure(error_reporters=[broken_reporter, lambda exc, context: calls.append(exc)])
    error = ValueError("bad input")
    with caplog.at_level(logging.WARNING, logger="pgbus"):
        report_error(error)

    assert calls == [error]
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "broken_reporter" in warning.getMessage()
    assert warning.exc_info[0] is RuntimeError


def test_never_raises_even_when_logging_fails():
    calls = []
    configure(error_reporters=[lambda exc, context: 1 / 0, lambda e, c: calls.append(e)])
    handler = BrokenHandler()
    logger = logging.getLogger("pgbus")
    logger.addHandler(handler)
    try:
        report_error(ValueError("bad input"), {"queue": "default"})
    finally:
        logger.removeHandler(handler)
    assert len(calls) == 1
