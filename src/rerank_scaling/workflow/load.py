"""Load and validate the workflow configuration before any job runs.

Two layers: the JSON schema (``schemas/config.schema.yaml``: types, enums, closed objects, and every
default) and cross-field checks the schema cannot express (:mod:`.checks`: depths, steps for
the checkpoints, model and collection directories, fitted metrics, ...). Every error names the
offending field and says how to fix it. A valid config gets the schema's defaults once, here
(:func:`rerank_scaling.settings.fill_defaults`): after :func:`validate_config` every section
has every key, and no stage reads a key with a default of its own.
"""

from __future__ import annotations

import os
from typing import Any

import jsonschema

from rerank_scaling.settings import fill_defaults, load_yaml, schema
from rerank_scaling.workflow.checks import cross_field_problems
from rerank_scaling.workflow.meaning_checks import duplicate_key_problems, meaning_problems

# One rule for integers: an integer field takes a whole number written without a decimal point.
# JSON Schema counts 3.0 as an integer, and Python then passes a float to range() or a tensor shape
# deep inside a job; refusing it here names the field instead.
STRICT_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda checker, instance: isinstance(instance, int) and not isinstance(instance, bool)
)
StrictValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=STRICT_TYPES)


#: A schema object's map of keys it no longer takes to their new names (an annotation the validator
#: ignores): the error names the new key.
RENAMED = "x-renamed"


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the field and the fix."""


def _field(path: Any) -> str:
    parts = []
    for part in path:
        parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(parts).lstrip(".") or "<top level>"


def _alternative(schema: dict[str, Any]) -> str:
    """One branch of a ``oneOf`` in words: ``'auto'``, ``an integer >= 1``, ``a number``."""
    if "const" in schema:
        return repr(schema["const"])
    bound = f" >= {schema['minimum']}" if "minimum" in schema else ""
    kind = schema.get("type", "value")
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}{bound}"


def _describe(error: jsonschema.ValidationError) -> str:
    field = _field(error.absolute_path)
    if error.validator == "oneOf":
        options = " or ".join(_alternative(branch) for branch in error.validator_value)
        return f"config field '{field}': {error.instance!r} is not allowed; use {options}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        renamed = error.schema.get(RENAMED, {})
        moved = [
            f"'{_field([*error.absolute_path, old])}' was renamed to '{_field([*error.absolute_path, new])}'"
            for old, new in renamed.items()
            if old in error.instance
        ]
        if moved:
            return f"config field {'; '.join(moved)}: rename it in your config"
        return f"config field '{field}': {error.message}. Allowed keys here: {', '.join(allowed)}"
    if error.validator == "required":
        return f"config field '{field}': {error.message}; add it (see config.yaml for an example)"
    if error.validator == "enum":
        return (
            f"config field '{field}': {error.instance!r} is not allowed; use one of {error.validator_value}"
        )
    if error.validator == "uniqueItems":
        twice = sorted({repr(v) for i, v in enumerate(error.instance) if v in error.instance[:i]})
        return (
            f"config field '{field}': {error.instance!r} lists {', '.join(twice)} more than once; each "
            "value adds rows (runs, metrics or splits) of its own, so a repeat doubles them: list each once"
        )
    if error.validator == "type" and isinstance(error.instance, float) and error.instance.is_integer():
        whole, text = int(error.instance), "is not an integer; write"
        return f"config field '{field}': {error.instance!r} {text} {whole}, without a decimal point"
    return f"config field '{field}': {error.message}"


def validate_config_files(paths: list[str | os.PathLike[str]]) -> None:
    """Refuse a config file that gives a key twice (naming the key and both lines)."""
    problems = [problem for path in paths for problem in duplicate_key_problems(path)]
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate ``config`` and give it the schema's defaults, in place (as Snakemake's
    ``validate(config, schema, set_default=True)`` does); raise :class:`ConfigError` listing every
    problem, else return it. The cross-field checks see the config with its defaults."""
    the_schema = schema()
    validator = StrictValidator(the_schema)
    problems = [
        _describe(e) for e in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    ]
    if not problems:
        fill_defaults(config, the_schema)
        problems = cross_field_problems(config) + meaning_problems(config)
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
    return config


def merged_config_files(paths: list[str | os.PathLike[str]]) -> dict[str, Any]:
    """The config files ``paths`` merged in order, each over the ones before (mappings key by key,
    any other value replaced), as Snakemake merges ``configfile:`` and every ``--configfile``;
    validated, with the schema's defaults: the config the workflow sees."""

    def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in over.items():
            both = isinstance(value, dict) and isinstance(out.get(key), dict)
            out[key] = merge(out[key], value) if both else value
        return out

    validate_config_files(paths)
    merged: dict[str, Any] = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            merged = merge(merged, load_yaml(handle) or {})
    return validate_config(merged)


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML config file and validate it."""
    validate_config_files([path])
    with open(path, encoding="utf-8") as handle:
        config = load_yaml(handle)
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping")
    return validate_config(config)
