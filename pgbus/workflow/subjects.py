"""Subjects: the record a run is about, stored as (type, id) and loaded back through a loader
the app registers. A loader answers None once the record is gone.

    pgbus.workflow.register_subject(User, load=lambda id: session.get(User, int(id)))
    SignupWorkflow.start(user)           # stored as ("User", str(user.id))
    SignupWorkflow.start(("User", "42")) # or the pair itself
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pgbus.workflow.errors import SubjectNotRegistered


@dataclasses.dataclass(frozen=True)
class SubjectType:
    cls: type
    name: str
    load: Callable[[str], Any]
    ident: Callable[[Any], Any]


_by_name: dict[str, SubjectType] = {}


def register_subject(
    cls: type,
    load: Callable[[str], Any],
    *,
    name: str | None = None,
    ident: Callable[[Any], Any] = lambda obj: obj.id,
) -> None:
    """Registers how to store and load subjects of `cls` (stored as `name`, the class name by
    default, and `ident(obj)`, its `id` by default)."""
    kind = SubjectType(cls, name or cls.__name__, load, ident)
    _by_name[kind.name] = kind


def identify(subject: Any) -> tuple[str, str] | None:
    """(type, id) of a subject; None for no subject."""
    if subject is None:
        return None
    if isinstance(subject, tuple) and len(subject) == 2:
        return str(subject[0]), str(subject[1])
    for kind in _by_name.values():
        if isinstance(subject, kind.cls):
            return kind.name, str(kind.ident(subject))
    raise SubjectNotRegistered(
        f"no subject type registered for {type(subject).__name__}: call "
        "pgbus.workflow.register_subject(cls, load=...) or pass (type, id)"
    )


def load(subject_type: str | None, subject_id: str | None) -> Any:
    if subject_type is None or subject_id is None:
        return None
    kind = _by_name.get(subject_type)
    if kind is None:
        raise SubjectNotRegistered(
            f"no loader for subjects of type {subject_type!r}: call "
            "pgbus.workflow.register_subject(cls, load=...) in the worker's app module"
        )
    return kind.load(subject_id)
