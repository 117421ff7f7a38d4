"""Arguments, outputs and signal payloads as stored JSON (tagged like job arguments), capped at
workflow_max_payload_size."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pgbus.config import settings
from pgbus.serialization import dump_arguments, load_arguments
from pgbus.workflow.errors import PayloadTooLarge


def encode_payload(values: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Values as stored JSON, refused when larger than workflow_max_payload_size."""
    encoded = dump_arguments((), dict(values))["kwargs"]
    size = len(json.dumps(encoded).encode())
    limit = settings().workflow_max_payload_size
    if size > limit:
        raise PayloadTooLarge(
            f"{what}: {size} bytes, more than workflow_max_payload_size ({limit})"
        )
    return encoded


def decode_payload(stored: dict[str, Any] | None) -> dict[str, Any]:
    return load_arguments({"kwargs": stored or {}})[1]
