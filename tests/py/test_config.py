from datetime import timedelta

import pytest

import pgbus
from pgbus.config import Settings, configure, reset, settings
from pgbus.errors import ConfigurationError


@pytest.fixture(autouse=True)
def _defaults():
    reset()
    yield
    reset()


def test_defaults_are_valid():
    s = Settings()
    assert s.queue_prefix == "pgbus"
    assert s.visibility_timeout == timedelta(seconds=30)
    assert s.max_retries == 5


def test_numbers_become_durations():
    configure(visibility_timeout=12.5)
    assert settings().visibility_timeout == timedelta(seconds=12.5)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("visibility_timeout", -1, "must not be negative"),
        ("visibility_timeout", 0, "longer than zero"),
        ("visibility_timeout", "30s", "timedelta or seconds"),
        ("max_retries", 2.5, "whole number"),
        ("max_retries", True, "whole number"),
        ("max_retries", -1, "at least 0"),
        ("retry_backoff_jitter", 2, "from 0 to 1"),
        ("queue_prefix", "Bad-Prefix", "lowercase"),
        ("database_url", "mysql://x", "postgresql://"),
        ("listen_notify", "yes", "True or False"),
        ("error_reporters", [print, 3], "callables"),
        ("metrics_backend", "graphite", "one of prometheus, statsd"),
        ("workers", [{"queues": "default"}], "list of queue names"),
        ("workers", [{"queues": ["a"], "threads": 0}], "at least 1"),
        ("workers", [{"queue": ["a"]}], "keys 'queues' and 'threads'"),
        ("web_auth", "alice", "callable taking the request"),
        ("web_per_page", 0, "at least 1"),
        ("web_per_page", 500, "at most 200"),
        ("web_refresh_interval", 0, "longer than zero"),
        ("web_filter_parameters", ["password", ""], "non-empty strings"),
    ],
)
def test_bad_values_are_named_and_change_nothing(name, value, words):
    before = settings()
    with pytest.raises(ConfigurationError) as err:
        configure(**{name: value})
    assert err.value.setting.startswith(name)
    assert words in str(err.value)
    assert settings() is before


def test_unknown_setting_is_refused():
    with pytest.raises(ConfigurationError, match="'colour' is not a pgbus setting"):
        configure(colour="blue")


def test_cross_field_rule():
    with pytest.raises(ConfigurationError, match="retry_backoff_base"):
        configure(retry_backoff_base=600)


def test_dsn_from_environment(monkeypatch):
    monkeypatch.setenv("PGBUS_DATABASE_URL", "postgresql://u@h/d")
    assert settings().dsn() == "postgresql://u@h/d"
    configure(database_url="postgres://x@y/z")
    assert settings().dsn() == "postgres://x@y/z"


def test_missing_dsn_is_a_named_error(monkeypatch):
    monkeypatch.delenv("PGBUS_DATABASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="PGBUS_DATABASE_URL"):
        settings().dsn()


def test_revision_precedence(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGBUS_REVISION", raising=False)
    assert settings().revision() is None
    (tmp_path / "REVISION").write_text("abc123\n")
    assert settings().revision() == "abc123"
    monkeypatch.setenv("PGBUS_REVISION", "env-rev")
    assert settings().revision() == "env-rev"
    configure(app_revision="set-rev")
    assert settings().revision() == "set-rev"


def test_package_exports_configure():
    assert pgbus.configure is configure


def test_settings_from_environment():
    from pgbus.config import from_environment

    s = from_environment(
        {
            "PGBUS_VISIBILITY_TIMEOUT": "2.5",
            "PGBUS_MAX_RETRIES": "7",
            "PGBUS_LISTEN_NOTIFY": "false",
            "PGBUS_APP_REVISION": "r1",
            "PGBUS_QUEUE_PREFIX": "app",
        }
    )
    assert s.visibility_timeout == timedelta(seconds=2.5)
    assert (s.max_retries, s.listen_notify, s.app_revision, s.queue_prefix) == (
        7,
        False,
        "r1",
        "app",
    )


def test_environment_booleans_and_the_mcp_payload_gate_read_the_same_words():
    """A yes is 1, true, yes or on, a no 0, false, no or off, in any case, for every boolean
    setting and for PGBUS_MCP_ALLOW_PAYLOADS alike; another word is refused by both."""
    from pgbus.mcp.transports import payloads_allowed

    from pgbus.config import from_environment
    from pgbus.errors import PgbusError

    yes, no = ("1", "TRUE", "yes", "On"), ("0", "false", "No", "off")
    for word, meant in [(w, True) for w in yes] + [(w, False) for w in no]:
        assert from_environment({"PGBUS_MCP_WRITE_TOOLS": word}).mcp_write_tools is meant, word
        assert payloads_allowed({"PGBUS_MCP_ALLOW_PAYLOADS": f" {word} "}) is meant, word
    assert (
        payloads_allowed({}) is False
        and payloads_allowed({"PGBUS_MCP_ALLOW_PAYLOADS": " "}) is False
    )
    with pytest.raises(ConfigurationError, match="PGBUS_MCP_WRITE_TOOLS"):
        from_environment({"PGBUS_MCP_WRITE_TOOLS": "ture"})
    with pytest.raises(PgbusError, match="PGBUS_MCP_ALLOW_PAYLOADS='ture' is neither a yes"):
        payloads_allowed({"PGBUS_MCP_ALLOW_PAYLOADS": "ture"})


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"PGBUS_MAX_RETRIES": "many"}, "cannot be read from PGBUS_MAX_RETRIES='many'"),
        ({"PGBUS_LISTEN_NOTIFY": "maybe"}, "PGBUS_LISTEN_NOTIFY"),
        ({"PGBUS_MAX_RETRIES": "-3"}, "at least 0"),
    ],
)
def test_bad_environment_values_are_named(env, words):
    from pgbus.config import from_environment

    with pytest.raises(ConfigurationError, match=words):
        from_environment(env)
