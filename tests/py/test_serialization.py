import datetime as dt
import enum
import uuid
from decimal import Decimal

import pytest

from pgbus.serialization import SerializationError, dump_arguments, load_arguments


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def roundtrip(*args, **kwargs):
    import json

    return load_arguments(json.loads(json.dumps(dump_arguments(args, kwargs))))


def test_common_types_round_trip():
    values = (
        dt.datetime(2026, 11, 29, 12, 30, tzinfo=dt.UTC),
        dt.datetime(2026, 1, 1, 8, 0),
        dt.date(2026, 2, 3),
        dt.time(4, 5, 6),
        dt.timedelta(days=2, seconds=5, microseconds=7),
        Decimal("12.3400"),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        Colour.RED,
        Level.HIGH,
        (1, "two", [3]),
        {1, 2},
        frozenset({"a"}),
        {"nested": [{"d": Decimal("1.5")}], "__pgbus__": "not a tag"},
        None,
        True,
        1.5,
        "text",
    )
    args, kwargs = roundtrip(*values, when=dt.date(2020, 1, 1))
    assert args == values
    assert type(args[8]) is Level
    assert kwargs == {"when": dt.date(2020, 1, 1)}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (object(), "argument 1 is a object"),
        ({1: "x"}, "argument 1 has a key 1: dictionary keys must be strings"),
        ([b"bytes"], "argument 1[0] is a bytes"),
        (float("nan"), "JSON cannot carry"),
        ("a\x00b", "argument 1 holds a NUL character"),
        ({"k": ["ok", "x\x00"]}, "argument 1['k'][1] holds a NUL character"),
        ({"k\x00": 1}, "argument 1 has a key that holds a NUL character"),
    ],
)
def test_unsupported_values_are_refused_by_name(value, words):
    with pytest.raises(SerializationError, match=words.replace("[", r"\[").replace("]", r"\]")):
        dump_arguments((value,), {})


def test_keyword_argument_named_in_error():
    with pytest.raises(SerializationError, match="keyword argument 'fh'"):
        dump_arguments((), {"fh": object()})
    with pytest.raises(SerializationError, match="a keyword argument's name holds a NUL"):
        dump_arguments((), {"f\x00h": 1})


def test_undecodable_messages_raise_serialization_error():
    with pytest.raises(SerializationError, match="args must be a list"):
        load_arguments({"args": "nope"})
    with pytest.raises(SerializationError, match="cannot decode"):
        load_arguments({"args": [{"__pgbus__": "date", "v": "not-a-date"}]})
    with pytest.raises(SerializationError, match="unknown argument tag"):
        load_arguments({"args": [{"__pgbus__": "pickle", "v": "x"}]})
    with pytest.raises(SerializationError, match="unknown Enum nowhere:Thing"):
        load_arguments({"args": [{"__pgbus__": "enum", "cls": "nowhere:Thing", "v": 1}]})
