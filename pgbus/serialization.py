"""Job arguments as JSON that round-trips the common Python types.

Plain JSON values pass through. datetime, date, time, timedelta, Decimal, UUID, Enum members,
tuples and sets travel as tagged objects {"__pgbus__": tag, "v": ...}. Anything else is refused
when the job is enqueued, with an error that says which argument and why.
"""

from __future__ import annotations

import datetime as dt
import enum
import sys
import uuid
from decimal import Decimal
from typing import Any

from pgbus.errors import PgbusError

TAG = "__pgbus__"
# A NUL character is in no text or JSON PostgreSQL can store.
NUL_REFUSAL = "holds a NUL character (\\u0000), which PostgreSQL cannot store"


class SerializationError(PgbusError):
    """An argument cannot travel in a job message, or a message cannot be read back."""


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _encode(value: Any, where: str) -> Any:
    if isinstance(value, str) and "\x00" in value:
        raise SerializationError(f"{where} {NUL_REFUSAL}")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, enum.Enum):  # before int: IntEnum members are ints too
        return {TAG: "enum", "cls": _class_path(type(value)), "v": _encode(value.value, where)}
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise SerializationError(f"{where} is {value!r}, which JSON cannot carry")
        return value
    if isinstance(value, list):
        return [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise SerializationError(
                    f"{where} has a key {k!r}: dictionary keys must be strings"
                )
            if "\x00" in k:
                raise SerializationError(f"{where} has a key that {NUL_REFUSAL}")
            out[k] = _encode(v, f"{where}[{k!r}]")
        if TAG in out:
            return {TAG: "dict", "v": out}
        return out
    if isinstance(value, tuple):
        return {TAG: "tuple", "v": [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, set | frozenset):
        items = [_encode(v, f"{where} item") for v in value]
        return {TAG: "frozenset" if isinstance(value, frozenset) else "set", "v": items}
    if isinstance(value, dt.datetime):
        return {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {TAG: "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {TAG: "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, Decimal):
        return {TAG: "decimal", "v": str(value)}
    if isinstance(value, uuid.UUID):
        return {TAG: "uuid", "v": str(value)}
    raise SerializationError(
        f"{where} is a {type(value).__name__}, which cannot travel in a job message: pass JSON "
        "values, datetime, date, time, timedelta, Decimal, UUID, Enum, tuple or set (or an id)"
    )


def _enum_member(path: str, raw: Any) -> enum.Enum:
    module_name, _, qualname = path.partition(":")
    # Only classes whose module is already loaded: a message never makes the worker import code.
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, enum.Enum)):
        raise SerializationError(f"unknown Enum {path}: import its module in the worker")
    return obj(raw)


_DECODERS = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "decimal": Decimal,
    "uuid": uuid.UUID,
}


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(TAG)
    if tag is None:
        return {k: _decode(v) for k, v in value.items()}
    raw = value.get("v")
    if tag in _DECODERS:
        return _DECODERS[tag](raw)
    if tag == "tuple":
        return tuple(_decode(v) for v in raw)
    if tag == "set":
        return {_decode(v) for v in raw}
    if tag == "frozenset":
        return frozenset(_decode(v) for v in raw)
    if tag == "dict":
        return {k: _decode(v) for k, v in raw.items()}
    if tag == "enum":
        return _enum_member(value["cls"], _decode(raw))
    raise SerializationError(f"unknown argument tag {tag!r}")


def dump_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """{"args": [...], "kwargs": {...}} ready for JSON; SerializationError names the culprit."""
    for k in kwargs:
        if "\x00" in k:
            raise SerializationError(f"a keyword argument's name {NUL_REFUSAL}")
    return {
        "args": [_encode(a, f"argument {i + 1}") for i, a in enumerate(args)],
        "kwargs": {k: _encode(v, f"keyword argument {k!r}") for k, v in kwargs.items()},
    }


def load_arguments(message: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The (args, kwargs) of a job message; SerializationError when they cannot be read."""
    try:
        args = message.get("args", [])
        kwargs = message.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise SerializationError("a job message's args must be a list and kwargs an object")
        return tuple(_decode(a) for a in args), {k: _decode(v) for k, v in kwargs.items()}
    except SerializationError:
        raise
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:
        raise SerializationError(f"cannot decode the job's arguments: {exc}") from exc
