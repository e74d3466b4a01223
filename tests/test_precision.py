"""Precision selection (rerank_scaling.precision): detected from the hardware, fp32 always selectable,
and the score layer kept in fp32 under autocast and with bf16 weights."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from rerank_scaling.precision import (
    autocast_dtype,
    casts_weights,
    cpu_bf16_units,
    cpu_flags,
    fp32_score_layer,
    native_bf16,
    resolve_precision,
    to_bf16_weights,
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


def test_only_bf16_on_a_cpu_casts_the_weights():
    assert casts_weights("bf16", "cpu")
    assert not casts_weights("fp32", "cpu"), "fp32 stays selectable"
    assert not casts_weights("bf16", "cuda:0") and not casts_weights("fp16", "cuda"), "autocast there"


def test_bf16_weights_keep_the_score_layer_fp32():
    """Weights cast to bf16 once: every layer computes in bf16 except the score layer, whose logit is
    fp32 and closer to the fp32 model's than a model cast whole; a second cast changes nothing."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 1))
    x = torch.randn(256, 16)
    reference = model(x).detach()
    whole = copy.deepcopy(model).to(torch.bfloat16)(x.bfloat16()).float().detach()
    cast = to_bf16_weights(copy.deepcopy(model))
    assert [p.dtype for p in cast.parameters()] == [torch.bfloat16] * 4 + [torch.float32] * 2
    with torch.inference_mode(), fp32_score_layer(cast, "cpu"):
        kept = cast(x.bfloat16())
        assert cast[1](cast[0](x.bfloat16())).dtype == torch.bfloat16
    assert kept.dtype == torch.float32
    assert (kept - reference).abs().max() < (whole - reference).abs().max()
    before = {k: v.clone() for k, v in cast.state_dict().items()}
    to_bf16_weights(cast)
    after = cast.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())
