"""The model-family registry (:mod:`rerank_scaling.families.registry`): one owner for every family
name, agreeing with the schema. (Not ``test_registry.py``: ``tests/laws/`` has one, and pytest's
default import mode needs unique test-module names.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rerank_scaling.families.registry import REGISTRY, family

SCHEMA = Path(__file__).resolve().parents[2] / "src" / "rerank_scaling" / "schemas" / "config.schema.yaml"


def test_an_unknown_family_is_named_with_the_registered_ones():
    with pytest.raises(KeyError, match="unknown family 'nope'; registered: hf, scratch, ladder"):
        family("nope")


def test_the_schema_and_the_registry_name_the_same_families_and_keys():
    models = yaml.safe_load(SCHEMA.read_text())["properties"]["models"]["items"]
    assert models["properties"]["family"]["enum"] == list(REGISTRY)
    required = {
        rule["if"]["properties"]["family"]["const"]: set(rule["then"]["required"]) for rule in models["allOf"]
    }
    assert required == {name: set(entry.required) for name, entry in REGISTRY.items()}
    assert all(entry.name == name for name, entry in REGISTRY.items())


def test_every_key_of_the_schemas_models_entry_is_read_by_some_family():
    """The schema's ``models[]`` keys are the union of what the families read: a key no family reads
    would be accepted by the schema and then refused for every family."""
    from rerank_scaling.families.family import COMMON_KEYS

    models = yaml.safe_load(SCHEMA.read_text())["properties"]["models"]["items"]
    read = {key for entry in REGISTRY.values() for key in (*COMMON_KEYS, *entry.required, *entry.optional)}
    assert read == set(models["properties"])
