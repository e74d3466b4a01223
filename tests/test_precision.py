"""Precision selection (rerank_scaling.precision): detected from the hardware, fp32 always selectable,
and the score layer kept in fp32 under autocast."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rerank_scaling.precision import (
    autocast_dtype,
    cpu_bf16_units,
    cpu_flags,
    fp32_score_layer,
    native_bf16,
    resolve_precision,
)


@pytest.mark.parametrize(
    ("flags", "unit"),
    [
        ({"avx512f", "amx_tile", "amx_bf16", "avx512_bf16"}, "amx_bf16"),  # Sapphire Rapids
        ({"avx512f", "avx512_bf16"}, "avx512_bf16"),  # Zen 4 / Zen 5, Cooper Lake
        ({"avx2", "fma", "avx512f"}, None),  # Skylake-SP, Zen 3: bf16 would be emulated
    ],
)
def test_cpu_bf16_units_from_flags(flags, unit):
    assert cpu_bf16_units(frozenset(flags)) == unit


def test_this_cpu_is_detected_as_its_proc_cpuinfo_says():
    """torch's cpuinfo and the kernel's flags agree on this machine's bf16 units."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo")
    kernel = set(next(line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")).split())
    expected = "amx_bf16" if "amx_bf16" in kernel else "avx512_bf16" if "avx512_bf16" in kernel else None
    assert cpu_bf16_units() == expected
    assert {"avx512_bf16", "amx_bf16"} & kernel == {"avx512_bf16", "amx_bf16"} & cpu_flags()


def test_resolve_precision_on_this_cpu():
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"  # honoured even where emulated
    assert resolve_precision("auto", "cpu") == ("bf16" if cpu_bf16_units() else "fp32")
    assert native_bf16("cpu") == (cpu_bf16_units() is not None)
    with pytest.raises(ValueError, match="training.precision: unknown precision 'half'"):
        resolve_precision("half", "cpu", "training.precision")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_resolve_precision_on_cuda():
    native = torch.cuda.is_bf16_supported(including_emulation=False)
    assert resolve_precision("auto", "cuda") == ("bf16" if native else "fp16")
    assert resolve_precision("fp32", "cuda") == "fp32"


def test_score_layer_stays_fp32_under_autocast():
    """Under bf16 autocast the encoder's matmuls run in bf16 but the relevance logit does not: bf16's
    8 significant bits would tie near-equal candidates. The patch is removed afterwards."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1))
    x = torch.randn(8, 16)
    with torch.autocast("cpu", dtype=autocast_dtype("bf16")):
        plain = model(x)
        with fp32_score_layer(model, "cpu"):
            kept = model(x)
            hidden = model[0](x)
    assert plain.dtype == torch.bfloat16 and hidden.dtype == torch.bfloat16
    assert kept.dtype == torch.float32
    reference = model.float()(x)
    assert (kept - reference).abs().max() < (plain.float() - reference).abs().max()
    assert "forward" not in vars(model[2]), "the score layer's patch outlives the context"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(x).dtype == torch.bfloat16
