"""The ``scratch`` family (:mod:`rerank_scaling.families.scratch`): the one that trains on the
corpus (its tokenizer), end to end in ``tests/training/test_train.py``."""

from __future__ import annotations

import pytest

from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.families.registry import REGISTRY


def test_only_scratch_trains_on_the_corpus_and_it_refuses_to_build_without_it():
    assert [name for name, entry in REGISTRY.items() if entry.needs_corpus] == ["scratch"]
    spec = {"name": "S", "family": "scratch", "role": "fit", "layers": 1, "hidden": 32, "heads": 2}
    with pytest.raises(ValueError, match="needs the corpus texts and a work directory"):
        build_cross_encoder({**spec, "intermediate": 64}, 32, 0)


def test_the_vocabulary_a_spec_without_one_gets_is_the_schemas_default():
    from rerank_scaling.settings import schema

    branches = schema()["properties"]["models"]["items"]["allOf"]
    scratch = next(b for b in branches if b["if"]["properties"]["family"]["const"] == "scratch")
    default = scratch["then"]["properties"]["vocab_size"]["default"]
    spec = {"name": "S", "family": "scratch", "role": "fit", "layers": 1, "hidden": 32, "heads": 2}
    spec["intermediate"] = 64
    assert REGISTRY["scratch"].config_json(spec)["vocab_size"] == default
    assert REGISTRY["scratch"].config_json({**spec, "vocab_size": 500})["vocab_size"] == 500
