"""Analytic FLOPs with ModernBERT's local-attention layers, against torch's FLOP counter (eager
attention, so that it sees the score and value products) on a tiny random ModernBERT."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_modernbert import save_tiny_modernbert

from rerank_scaling.planning.encoder_flops import EncoderShape, band_keys
from rerank_scaling.planning.measured_profiles import FLOP_RATIO_RANGE, flop_check, measure_profile


@pytest.mark.parametrize(("seq_len", "reach"), [(1, 0), (5, 0), (9, 2), (40, 4), (7, 6), (7, 100)])
def test_band_keys_counts_the_band(seq_len: int, reach: int) -> None:
    brute = sum(1 for i in range(seq_len) for j in range(seq_len) if abs(i - j) <= reach) / seq_len
    assert band_keys(seq_len, reach) == pytest.approx(brute)


def test_local_layers_count_their_band_only() -> None:
    shape = EncoderShape(layers=3, hidden=64, intermediate=96, ffn_matrices=3, local_layers=1, local_reach=4)
    dense = shape.forward_flops(256, dense_local=True)
    band = shape.forward_flops(256)
    assert dense - band == pytest.approx(256 * 4 * 64 * (256 - band_keys(256, 4)))
    assert shape.forward_flops(256, keys=5) == shape.forward_flops(
        256, keys=5, dense_local=True
    )  # window < band


@pytest.mark.slow  # two short profiles: a few seconds each on a quiet machine
@pytest.mark.parametrize("head", ["cls", "mean"])
def test_profile_flops_agree_with_the_counter_and_explain_the_band(tmp_path: Path, head: str) -> None:
    model = save_tiny_modernbert(tmp_path / "tiny")
    spec = {"name": f"tiny-{head}", "family": "hf", "path": str(model), "head": head}
    profile = measure_profile(spec, max_length=48, batch=2, steps=1, device="cpu", freeze_embeddings=False)
    assert profile.shape["local_layers"] == 1 and profile.shape["local_reach"] == 4
    shape = EncoderShape(**profile.shape)
    dense = profile.batch * shape.train_flops(profile.seq_len, dense_local=True)
    low, high = FLOP_RATIO_RANGE
    assert low <= dense / profile.train_flops_measured <= high
    assert profile.train_flops_analytic < dense  # the planner counts the local layer's band
    line = flop_check(profile)
    assert "(ok)" in line and "1 of 3 layers attend locally (reach 4)" in line
