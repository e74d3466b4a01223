"""Turn a config section (a dict) into a settings dataclass, rejecting unknown keys by name."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypeVar

T = TypeVar("T")


def settings_from_dict(cls: type[T], values: dict[str, Any] | None, section: str) -> T:
    """Build dataclass ``cls`` from ``values``; an unknown key raises naming ``section.key``."""
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"config section '{section}': unknown key(s) {unknown}; known: {sorted(known)}")
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in values and isinstance(values[field.name], list):
            values[field.name] = tuple(values[field.name])
    return cls(**values)


def parse_json_arg(text: str) -> Any:
    """Parse a JSON command-line argument, with an error that shows what was passed."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"expected a JSON value, got {text[:200]!r}: {err}") from err
