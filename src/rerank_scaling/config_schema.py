"""The config's JSON schema (``schemas/config.schema.yaml``) and its defaults: the one home of every
default value of the workflow config.

:func:`fill_defaults` applies the schema's ``default:`` values to a config, as
``snakemake.utils.validate(config, schema, set_default=True)`` does (``setdefault`` on each property
that has a default: a key the user gave, ``null`` included, is kept), with three differences, each
so that a default lands only where the schema means it:

* a default inside an ``if`` is never applied (Snakemake's validator fills it while *testing* the
  condition, even when the condition then fails); a ``then`` (``else``) branch's defaults apply only
  when its ``if`` holds (does not hold);
* each default is a copy (Snakemake hands out the schema's own object, so two configs filled from
  one schema would share, and could change, one ``[]`` or ``{}``);
* it walks ``properties``, ``additionalProperties``, ``items`` and ``allOf`` only, not ``oneOf`` or
  ``anyOf`` (no default sits in one).

Arrays of objects (``models``) get their items' defaults, each item on its own.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

import jsonschema
import yaml


@functools.cache
def _schema() -> dict[str, Any]:
    text = resources.files("rerank_scaling").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.safe_load(text)


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
