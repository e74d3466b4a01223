"""The compiled kernels of the fused bf16 evaluation encoder (``kernels/window_attention/
packed_attention.h``). ``packed_attention``: softmax(q k^T / sqrt(d) + key mask) v against fp32
attention, no worse than PyTorch's bf16 SDPA on the same inputs, at every length it covers (one to
eight blocks of 16 keys, partial blocks included), both head widths, padded keys ignored.
``row_layer_norm``: against fp32's layer norm, no worse than PyTorch's bf16 one. Shapes they do not
cover are refused by name, and a scoring job never compiles a first build."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rerank_scaling.compute import extension_build
from rerank_scaling.compute.fused_encoder import PACKED_HEAD_WIDTHS, PACKED_LENGTH, encoder_kernels

pytestmark = pytest.mark.skipif(
    encoder_kernels() is None,
    reason="the extension is not built here (BUILD_EXTENSION=1 scripts/install.sh)",
)


def case(batch: int, length: int, heads: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed bf16 rows (batch, length, 3, heads, width) and a key mask padding each sequence after
    a random length (the first sequence unpadded)."""
    generator = torch.Generator().manual_seed(seed)
    qkv = (2 * torch.randn(batch, length, 3, heads, width, generator=generator)).to(torch.bfloat16)
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    lengths[0] = length
    return qkv, torch.arange(length)[None, :] < lengths[:, None]


def attention(qkv: torch.Tensor, keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """SDPA in ``dtype`` with the additive key mask, in the kernel's (batch, length, heads, width)."""
    query, key, value = qkv.to(dtype).permute(2, 0, 3, 1, 4).unbind(0)
    mask = (~keep)[:, None, None, :].to(dtype) * torch.finfo(dtype).min
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask).transpose(1, 2)


@pytest.mark.parametrize("width", PACKED_HEAD_WIDTHS)
@pytest.mark.parametrize("length", [1, 5, 16, 17, 48, 100, PACKED_LENGTH])
def test_it_attends_as_fp32_attention_within_bf16s_error(length: int, width: int) -> None:
    kernel = encoder_kernels().attention
    qkv, keep = case(6, length, 3, width, seed=length * width)
    with torch.inference_mode():
        out = kernel(qkv, keep, width**-0.5)
        exact = attention(qkv, keep, torch.float32)
        sdpa_bf16 = attention(qkv, keep, torch.bfloat16).float()
    assert out.shape == (6, length, 3, width) and out.dtype == torch.bfloat16
    error = (out.float() - exact).abs().max().item()
    yardstick = (sdpa_bf16 - exact).abs().max().item()  # PyTorch's own bf16 attention
    assert error <= max(1.5 * yardstick, 2**-8 * exact.abs().max().item()), (error, yardstick)


def test_padded_keys_do_not_reach_any_row() -> None:
    """Changing the padded keys' and values' rows changes no output."""
    kernel = encoder_kernels().attention
    qkv, keep = case(4, 40, 2, 32, seed=7)
    other = qkv.clone()
    other[:, :, 1:][~keep] = 99.0  # keys and values of the padding
    with torch.inference_mode():
        assert torch.equal(kernel(qkv, keep, 0.2), kernel(other, keep, 0.2))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda qkv, keep: (qkv.float(), keep), "bfloat16"),
        (lambda qkv, keep: (torch.cat([qkv] * 3, dim=1), torch.cat([keep] * 3, dim=1)), "at most 128 tokens"),
        (lambda qkv, keep: (qkv[..., :16].contiguous(), keep), "heads of 32 or 64"),
        (lambda qkv, keep: (qkv, keep[:, :-1].contiguous()), "keep must be"),
        (lambda qkv, keep: (qkv[:, :, :2].contiguous(), keep), "(B, L, 3, H, D)"),
    ],
)
def test_shapes_it_does_not_cover_are_refused_by_name(change, message: str) -> None:
    qkv, keep = change(*case(2, 48, 2, 32, seed=0))
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        encoder_kernels().attention(qkv, keep, 0.2)


@pytest.mark.parametrize("width", [16, 384, 768, 2048])
def test_the_row_layer_norm_is_fp32s_within_bf16s_error(width: int) -> None:
    generator = torch.Generator().manual_seed(width)
    x = (3 * torch.randn(257, width, generator=generator) + 1.5).to(torch.bfloat16)
    weight, bias = 1 + torch.randn(width, generator=generator), torch.randn(width, generator=generator)
    with torch.inference_mode():
        out = encoder_kernels().layer_norm(x, weight, bias, 1e-12)
        exact = F.layer_norm(x.float(), (width,), weight, bias, 1e-12)
        torch_bf16 = F.layer_norm(x, (width,), weight.to(torch.bfloat16), bias.to(torch.bfloat16), 1e-12)
    assert out.shape == x.shape and out.dtype == torch.bfloat16
    error = (out.float() - exact).abs().max().item()
    yardstick = (torch_bf16.float() - exact).abs().max().item()  # PyTorch's bf16 layer norm
    assert error <= yardstick, (error, yardstick)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda x, w, b: (x.float(), w, b), "bfloat16"),
        (lambda x, w, b: (x[:, :40].contiguous(), w[:40], b[:40]), "multiple of 16"),
        (lambda x, w, b: (x, w.to(torch.bfloat16), b), "float32"),
        (lambda x, w, b: (x, w[:32], b), "W elements"),
    ],
)
def test_the_row_layer_norm_refuses_what_it_does_not_cover(change, message: str) -> None:
    x, weight, bias = torch.randn(4, 64).to(torch.bfloat16), torch.ones(64), torch.zeros(64)
    with pytest.raises(RuntimeError, match=message):
        encoder_kernels().layer_norm(*change(x, weight, bias), 1e-12)


def test_no_build_here_means_sdpa_not_a_compile(tmp_path, monkeypatch) -> None:
    """Where no build exists (another machine's build folder), built_kernels answers None at once."""
    monkeypatch.setattr(extension_build, "BUILD_DIR", tmp_path)
    monkeypatch.setattr(extension_build, "_LOADED", {})
    assert extension_build.built_kernels() is None
    assert list(tmp_path.iterdir()) == [], "nothing was built"
