"""Turn a config section (a dict) into its settings dataclass: the schema's defaults filled in,
unknown keys rejected by name.

Every settings dataclass (``TrainSettings``, ``EvalSettings``, ...) names its section
(``SECTION``) and has no default of its own for a config key: a key the config lacks takes the
schema's default (:mod:`rerank_scaling.config_schema`, the one home of defaults), so a value cannot
differ between the workflow's parse, a job and a test. A section's dataclass also declares which of
its keys say how a job runs (``RESOURCE_KEYS``) or which runs exist (``GRID_KEYS``) rather than what
one job computes; the rules leave those out of the params that decide re-runs (:func:`without`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, ClassVar, TypeVar

import jsonschema

from rerank_scaling.config_schema import fill_defaults, section_defaults, section_schema

T = TypeVar("T")

#: Keys of a section that size a job (its threads, memory, time limit), not what it computes:
#: changing them re-runs nothing.
RESOURCE_KEYS = ("threads", "mem_mb", "runtime")


class SectionSettings:
    """Base of a config section's settings dataclass: its section's path in the schema, the keys
    that size its jobs, and :meth:`of`, the constructor with the schema's defaults."""

    SECTION: ClassVar[str] = ""
    RESOURCE_KEYS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def of(cls: type[T], **values: Any) -> T:
        """The settings of a section that gives ``values`` (the schema's defaults for the rest)."""
        return settings_from_dict(cls, values)


def settings_from_dict(cls: type[T], values: dict[str, Any] | None, section: str | None = None) -> T:
    """Build dataclass ``cls`` from ``values`` plus the schema's defaults of its section (``section``,
    else ``cls.SECTION``) for the keys ``values`` lacks; an unknown key raises naming ``section.key``."""
    section = section or cls.SECTION  # type: ignore[attr-defined]
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"config section '{section}': unknown key(s) {unknown}; known: {sorted(known)}")
    _check_values(getattr(cls, "SECTION", section), values)
    defaults = section_defaults(getattr(cls, "SECTION", section))
    values = {**{key: value for key, value in defaults.items() if key in known}, **values}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in values and isinstance(values[field.name], list):
            values[field.name] = tuple(values[field.name])
    return cls(**values)


def _plain(value: Any) -> Any:
    """``value`` as the config's YAML would give it: tuples as lists, numpy scalars as Python's."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.item() if hasattr(value, "item") else value


def _check_values(section: str, values: dict[str, Any]) -> None:
    """Each given value against its key's schema (types, ranges, enums): the schema is the one check,
    for a library caller's values as for the config's."""
    properties = section_schema(section).get("properties", {})
    for key, value in values.items():
        if key in properties:
            error = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(properties[key]).iter_errors(_plain(value))
            )
            if error is not None:
                raise ValueError(f"config field '{section}.{key}': {error.message}")


def settings_of(cls: type[T], section: dict[str, Any]) -> T:
    """``cls`` from the keys it holds of a validated config ``section`` (the schema has refused
    unknown keys; the others belong to other settings, e.g. the grid's keys of ``training``)."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return settings_from_dict(cls, {key: value for key, value in section.items() if key in known})


def with_defaults(section: str, values: Any) -> Any:
    """A config section (or ``models`` list) a job was passed as written, with the schema's defaults
    for the keys it lacks: what :func:`rerank_scaling.config.validate_config` gives the workflow."""
    return fill_defaults(copy.deepcopy(values), section_schema(section))


def model_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A ``models[]`` entry as written (a job's param, a library caller's dict) with the schema's
    defaults for the keys it lacks (``head``; a scratch model's ``vocab_size``), as the validated
    config holds it; a copy, so a spec used as a key (the profile cache) stays as written."""
    (filled,) = with_defaults("models", [spec])
    return filled


def written_section(config: dict[str, Any] | None, section: str) -> dict[str, Any]:
    """Section ``section`` of a config file as written, ``{}`` where the file leaves it out (an
    overlay, which Snakemake merges over another file): for a caller that must tell what one file
    gives from the schema's defaults (a benchmark's overlay, the extension build's decision)."""
    return dict((config or {}).get(section) or {})


def without(section: dict[str, Any], *keys: tuple[str, ...]) -> dict[str, Any]:
    """``section`` without the keys of the ``keys`` groups (e.g. a dataclass's ``RESOURCE_KEYS``)."""
    dropped = {key for group in keys for key in group}
    return {key: value for key, value in section.items() if key not in dropped}


def parse_json_arg(text: str) -> Any:
    """Parse a JSON command-line argument, with an error that shows what was passed."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"expected a JSON value, got {text[:200]!r}: {err}") from err
