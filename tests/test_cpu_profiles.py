"""The measured per-CPU-kind table (cpu_profiles): kinds from the CPU's flags, the fallback for an
unmeasured kind, and the evaluation's near-tie rescoring using the table's safety factor."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from rerank_scaling.compute import cpu_profiles
from rerank_scaling.compute.cpu_profiles import (
    FALLBACK,
    PROFILES,
    CpuProfile,
    cpu_kind,
    cpu_profile,
    eval_batch_size,
)
from rerank_scaling.evaluation.near_ties import SAFETY_FACTOR
from rerank_scaling.evaluation.rerank import TokenizedPairs, score_pairs
from rerank_scaling.precision import cpu_bf16_units


@pytest.mark.parametrize(
    ("flags", "vendor", "family", "kind"),
    [
        ({"amx_bf16", "avx512_bf16"}, "GenuineIntel", 6, "intel-amx"),
        ({"avx512_bf16"}, "AuthenticAMD", 25, "amd-avx512-bf16"),  # Zen 4
        ({"avx512_bf16"}, "AuthenticAMD", 26, "amd-avx512-bf16"),  # Zen 5
        ({"avx512_bf16"}, "GenuineIntel", 6, "intel-avx512-bf16"),
        ({"avx2"}, "AuthenticAMD", 25, "amd-zen3"),
        ({"avx2"}, "AuthenticAMD", 23, "amd-avx2"),  # Zen 1/2
        ({"avx2"}, "GenuineIntel", 6, "no-bf16"),
    ],
)
def test_cpu_kind_from_flags_and_family(flags, vendor, family, kind) -> None:
    assert cpu_kind(frozenset(flags), vendor, family) == kind


def test_the_fp32_path_follows_the_kind_s_measured_gemm_ranking() -> None:
    """Zen 2's oneDNN GEMM outran MKL's and Zen 3's did not (fused_encoder_fp32_zen2.md, _zen3.md):
    the fused fp32 encoder on the one, the eager forward on the other."""
    assert PROFILES["amd-avx2"].fused_fp32 and not PROFILES["amd-zen3"].fused_fp32


def test_an_unmeasured_kind_gets_the_conservative_fallback() -> None:
    assert cpu_profile("no-bf16") is FALLBACK
    assert FALLBACK.near_tie_factor == SAFETY_FACTOR, "the factor used before the table"
    assert FALLBACK.eval_compile_pairs is None and FALLBACK.train_compile_steps is None
    assert not FALLBACK.fused_fp32, "an unmeasured kind scores fp32 eagerly"
    assert all(p.source.startswith("benchmarks/results/") for p in PROFILES.values()), "each names its file"
    if cpu_bf16_units() == "amx_bf16":
        assert cpu_profile() is PROFILES["intel-amx"]


def test_each_measured_kind_names_reports_that_exist() -> None:
    """A profile's numbers come from committed benchmark reports: every file its source names is there."""
    repo = Path(__file__).resolve().parents[1]
    for profile in PROFILES.values():
        files = [name.strip() for name in profile.source.split(",")]
        assert files and all((repo / name).is_file() for name in files), (profile.kind, files)


def test_each_kind_s_auto_batch_size_is_the_best_of_its_batch_reports() -> None:
    """``evaluation.batch_size: auto`` is, per measured kind, the batch size that every
    ``bench_eval_batch.py`` report it names found best (64 on all but the Zen 3, 16 there); an
    unmeasured kind and a GPU get 64, and a number is taken as given."""
    repo = Path(__file__).resolve().parents[1]
    for profile in PROFILES.values():
        reports = [
            n.strip() for n in profile.source.split(",") if Path(n.strip()).name.startswith("eval_batch_")
        ]
        best = {
            int(re.search(rf"\*\*Best on this CPU kind \(`{profile.kind}`\): batch (\d+)\*\*", text).group(1))
            for text in ((repo / name).read_text() for name in reports if "_bar_" not in name)
        }
        assert best == {profile.eval_batch_size}, (profile.kind, reports, best)
    assert PROFILES["amd-zen3"].eval_batch_size == 16 and FALLBACK.eval_batch_size == 64
    assert eval_batch_size("auto", "cpu") == cpu_profile().eval_batch_size
    assert eval_batch_size("auto", "cuda") == 64 and eval_batch_size(32, "cpu") == 32


def test_the_near_tie_rescoring_uses_the_table_factor(monkeypatch, caplog) -> None:
    from test_compiled_graphs import Pooled, _tokens

    tokens: TokenizedPairs = _tokens(24)
    model = Pooled(0).eval()
    factors = []
    for factor in (2.0, 5.0):
        profile = CpuProfile("test", factor, None, None, "benchmarks/results/test.md")
        monkeypatch.setattr(cpu_profiles, "cpu_profile", lambda kind=None, p=profile: p)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="rerank_scaling.evaluation.rerank"):
            score_pairs(model, tokens, 8, 0, "cpu", "bf16")
        (record,) = [r for r in caplog.records if hasattr(r, "near_ties")]
        factors.append(record.near_ties.factor)
        report = record.near_ties
        if report.rounds == 1:  # no rescored pair raised the bound: e = factor x the calibration's error
            assert report.bound == pytest.approx(factor * report.calibration_error)
    assert factors == [2.0, 5.0]
