"""Turn a config section (a dict) into its settings dataclass: the schema's defaults filled in,
unknown keys rejected by name.

Every settings dataclass (``TrainSettings``, ``EvalSettings``, ...) names its section
(``SECTION``) and has no default of its own for a config key: a key the config lacks takes the
schema's default (below: the one home of defaults), so a value cannot
differ between the workflow's parse, a job and a test. A section's dataclass also declares which of
its keys say how a job runs (``RESOURCE_KEYS``) or which runs exist (``GRID_KEYS``) rather than what
one job computes; the rules leave those out of the params that decide re-runs (:func:`without`).

The config's JSON schema (``schemas/config.schema.yaml``) is read here, on the ground floor, because
every job fills its section's defaults from it; the workflow layer (:mod:`rerank_scaling.workflow.load`)
validates whole configs against it. :func:`fill_defaults` applies the schema's ``default:`` values to a
config, as ``snakemake.utils.validate(config, schema, set_default=True)`` does (``setdefault`` on
each property that has a default: a key the user gave, ``null`` included, is kept), with three
differences, each so that a default lands only where the schema means it:

* a default inside an ``if`` is never applied (Snakemake's validator fills it while *testing* the
  condition, even when the condition then fails); a ``then`` (``else``) branch's defaults apply only
  when its ``if`` holds (does not hold);
* each default is a copy (Snakemake hands out the schema's own object, so two configs filled from
  one schema would share, and could change, one ``[]`` or ``{}``);
* it walks ``properties``, ``additionalProperties``, ``items`` and ``allOf`` only, not ``oneOf`` or
  ``anyOf`` (no default sits in one).

Arrays of objects (``models``) get their items' defaults, each item on its own. A config problem
is reported in one form, :func:`problem` (a line naming the field and the fix).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from importlib import resources
from typing import Any, ClassVar, TypeVar

import jsonschema
import yaml

T = TypeVar("T")

#: A config check's problems: each a line naming the config field and the fix (:func:`problem`).
Problems = list[str]


def problem(field: str, text: str) -> str:
    """``config field '<field>': <text>``, the form every check's message takes."""
    return f"config field '{field}': {text}"


#: A safe YAML loader with libyaml's C parser where PyYAML was built with it, else the pure-Python
#: one: both build the same objects from a file (the constructor is Python in both); the C parser
#: reads the config schema ~16x faster, which every job and every parse of the Snakefile does.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(stream: Any) -> Any:
    """``yaml.safe_load`` through :data:`YAML_LOADER` (text or an open file)."""
    return yaml.load(stream, Loader=YAML_LOADER)


@functools.cache
def _schema() -> dict[str, Any]:
    text = resources.files("rerank_scaling").joinpath("schemas/config.schema.yaml").read_text()
    return load_yaml(text)


def schema() -> dict[str, Any]:
    """The JSON schema of the workflow config (a copy: callers may change it)."""
    return copy.deepcopy(_schema())


def fill_defaults(instance: Any, subschema: dict[str, Any]) -> Any:
    """Give ``instance`` (a schema-valid config, or a part of one valid for ``subschema``) every
    default of ``subschema`` it lacks, in place (module docstring); returns ``instance``."""
    if isinstance(instance, dict):
        properties = subschema.get("properties", {})
        for key, child in properties.items():
            if "default" in child and key not in instance:
                instance[key] = copy.deepcopy(child["default"])
            if key in instance:
                fill_defaults(instance[key], child)
        extra = subschema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in instance.items():
                if key not in properties:
                    fill_defaults(value, extra)
    if isinstance(instance, list) and isinstance(subschema.get("items"), dict):
        for item in instance:
            fill_defaults(item, subschema["items"])
    for part in subschema.get("allOf", []):
        fill_defaults(instance, part)
    if "if" in subschema:
        branch = "then" if jsonschema.Draft202012Validator(subschema["if"]).is_valid(instance) else "else"
        if branch in subschema:
            fill_defaults(instance, subschema[branch])
    return instance


def section_schema(section: str) -> dict[str, Any]:
    """The subschema of a config section by its dotted path (``training``, ``dataset.builtin``)."""
    node = _schema()
    for key in section.split("."):
        node = node["properties"][key]
    return node


@functools.cache
def _section_defaults(section: str) -> dict[str, Any]:
    return {
        key: child["default"]
        for key, child in section_schema(section)["properties"].items()
        if "default" in child
    }


def section_defaults(section: str) -> dict[str, Any]:
    """Key -> the schema's default, for every key of ``section`` that has one (copies)."""
    return copy.deepcopy(_section_defaults(section))


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
    for the keys it lacks: what :func:`rerank_scaling.workflow.load.validate_config` gives the workflow."""
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
