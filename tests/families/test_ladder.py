"""The ``ladder`` family (:mod:`rerank_scaling.families.ladder`): counted at the depth it keeps,
and no deeper than its base."""

from __future__ import annotations

from conftest import LADDER

from rerank_scaling.families.models import build_cross_encoder, model_stats
from rerank_scaling.families.registry import family, family_of
from rerank_scaling.planning.memory import MemoryShape
from rerank_scaling.workflow.job_resources import encoder_shape

MINILM = LADDER["path"]


def test_a_ladder_is_counted_at_its_kept_depth_as_built():
    spec = {**LADDER, "layers": 2, "head": "cls"}
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
