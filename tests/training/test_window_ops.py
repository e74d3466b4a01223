"""The fused windowed-attention kernel (one pass, online softmax; Schlatt et al., Sparse Attention on
Cross-Encoders eqs. 1-3) against the two-product reference and dense masked attention: windows from 0 to
beyond the sequence, padded batches, query_sees_document both ways, float64 / float32 / bfloat16, and
gradients."""

from __future__ import annotations

import pytest
import torch
from test_window_attention import _batch

from rerank_scaling.compute.extension_build import load_kernels
from rerank_scaling.training import window_attention as wa

# (query segment, document) lengths of right-padded pairs; the last has a one-token document
PAIRS = [(5, 40), (9, 13), (3, 1), (12, 33)]
WIDTH = 45
WINDOWS = [0, 1, 4, 17, 64]  # 64 >= WIDTH
TOLERANCE = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 2e-2)}


@pytest.fixture(scope="module", autouse=True)
def kernels() -> None:
    assert load_kernels() is not None, "the windowed-attention extension did not build (warning above)"


def _inputs(dtype: torch.dtype, seed: int, heads: int = 3, dim: int = 32) -> list[torch.Tensor]:
    """q, k, v (B, H, S, D) as a BERT layer makes them: views of a (B, S, H, D) projection."""
    generator = torch.Generator().manual_seed(seed)
    states = torch.randn(3, len(PAIRS), WIDTH, heads, dim, dtype=torch.float64, generator=generator)
    return [t.to(dtype).transpose(1, 2) for t in states.unbind(0)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("query_sees_document", [False, True])
@pytest.mark.parametrize("window", WINDOWS)
def test_fused_matches_reference_and_dense(
    window: int, query_sees_document: bool, dtype: torch.dtype
) -> None:
    types, mask = _batch(PAIRS, WIDTH)
    layout = wa.window_layout(types, mask, window, query_sees_document)
    query, key, value = (t.requires_grad_() for t in _inputs(dtype, window))
    fused = wa.window_attention(query, key, value, layout)
    assert fused.dtype == dtype and fused.shape == query.shape
    # references in float64 on the same (rounded) inputs: what is left is the kernel's own error
    exact = [t.detach().double().requires_grad_() for t in (query, key, value)]
    reference = wa.window_attention_reference(*exact, layout)
    dense = wa.masked_attention(*exact, wa.dense_pattern_mask(types, mask, window, query_sees_document))
    valid = mask.bool()[:, None, :, None]
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(reference * valid, dense * valid)
    torch.testing.assert_close(fused.double() * valid, reference * valid, rtol=rtol, atol=atol)
    weight = torch.randn(fused.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * valid
    grads = torch.autograd.grad((fused.double() * weight).sum(), (query, key, value))
    reference_grads = torch.autograd.grad((reference * weight).sum(), exact)
    scale = max(g.abs().max().item() for g in reference_grads)
    for grad, expected in zip(grads, reference_grads, strict=True):
        assert grad.dtype == dtype
        torch.testing.assert_close(
            grad.double() * valid, expected * valid, rtol=rtol, atol=atol * max(scale, 1.0)
        )


@pytest.mark.parametrize("query_sees_document", [False, True])
@pytest.mark.parametrize("window", [0, 2, 20])  # 20 >= length 11
def test_fused_gradcheck(window: int, query_sees_document: bool) -> None:
    types, mask = _batch([(3, 6), (4, 2)], 11)
    layout = wa.window_layout(types, mask, window, query_sees_document)
    generator = torch.Generator().manual_seed(window)
    inputs = [
        t.requires_grad_() for t in torch.randn(3, 2, 2, 11, 4, dtype=torch.float64, generator=generator)
    ]
    valid = mask.bool()[:, None, :, None]  # padding rows are never read; gradcheck what is

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return wa.fused_window_attention(q, k, v, layout) * valid

    assert torch.autograd.gradcheck(attend, inputs)


def test_fused_long_sequence_matches_reference() -> None:
    """Several row tiles and key chunks (s = 300, w = 70: the band spans chunk boundaries)."""
    length = 300
    types = torch.ones(2, length, dtype=torch.long)
    types[0, :20], types[1, :7] = 0, 0
    mask = torch.ones_like(types)
    mask[1, 250:] = 0
    layout = wa.window_layout(types, mask, 70)
    query, key, value = torch.randn(3, 2, 2, length, 16, dtype=torch.float64).unbind(0)
    valid = mask.bool()[:, None, :, None]
    torch.testing.assert_close(
        wa.fused_window_attention(query, key, value, layout) * valid,
        wa.window_attention_reference(query, key, value, layout) * valid,
    )


def test_fused_memory_is_linear_in_length() -> None:
    """No (S, G + 2w + 1) tensor: the fused forward allocates O(S D), far below the reference."""

    length, window = 1024, 64
    types = torch.ones(1, length, dtype=torch.long)
    types[:, :32] = 0
    layout = wa.window_layout(types, torch.ones_like(types), window)
    query, key, value = torch.randn(3, 1, 4, length, 32).unbind(0)

    def peak(fn) -> int:  # the benchmark's measure: peak bytes allocated during one call
        from bench_window_attention import peak_bytes

        return peak_bytes(fn, "cpu")

    with torch.inference_mode():
        fused = peak(lambda: wa.window_attention(query, key, value, layout))
        reference = peak(lambda: wa.window_attention_reference(query, key, value, layout))
    output = query.numel() * 4
    scores = 4 * length * (32 + 2 * window + 1) * 4  # one (H, S, G + W) float32 tensor
    assert fused < output + scores / 4
    assert reference > scores


def test_fused_rejects_bad_inputs() -> None:
    ops = load_kernels()
    types, mask = _batch([(3, 6)], 9)
    layout = wa.window_layout(types, mask, 2)
    query = torch.randn(1, 2, 9, 4)
    with pytest.raises(RuntimeError, match="shapes differ"):
        ops.fused_attention(query, query[..., :8, :], query, layout.roles, 3, 2, 0.5, 0.0, 0)
    with pytest.raises(RuntimeError, match="roles must be"):
        ops.fused_attention(query, query, query, layout.roles.long(), 3, 2, 0.5, 0.0, 0)
    with pytest.raises(RuntimeError, match="window must be >= 0"):
        ops.fused_attention(query, query, query, layout.roles, 3, -1, 0.5, 0.0, 0)
    with pytest.raises(RuntimeError, match="dropout must lie in"):
        ops.fused_attention(query, query, query, layout.roles, 3, 2, 0.5, 1.0, 0)


@pytest.mark.slow
def test_flex_baseline_matches_fused() -> None:
    """The benchmark's FlexAttention baseline computes the same function (compiles: tens of seconds)."""
    types, mask = _batch(PAIRS, WIDTH)
    for query_sees_document in (False, True):
        layout = wa.window_layout(types, mask, 4, query_sees_document)
        query, key, value = (t.float().contiguous() for t in _inputs(torch.float32, 0))
        valid = mask.bool()[:, None, :, None]
        flex = wa.flex_window_attention(query, key, value, wa.flex_block_mask(layout))
        torch.testing.assert_close(flex * valid, wa.window_attention(query, key, value, layout) * valid)


def test_fused_dropout_drops_probabilities_and_rescales() -> None:
    """With one-hot values the output row is the (dropped, rescaled) probability row: each entry is
    0 or p / (1 - rate), about ``rate`` of the seen keys are dropped, the seed fixes the mask."""
    types, mask = _batch([(6, 90)], 96)
    layout = wa.window_layout(types, mask, 8)
    generator = torch.Generator().manual_seed(3)
    query, key = torch.randn(2, 1, 2, 96, 96, dtype=torch.float64, generator=generator).unbind(0)
    value = torch.eye(96, dtype=torch.float64).expand(1, 2, 96, 96)
    rate = 0.3  # dropout
    probs = wa.window_attention_reference(query, key, value, layout)
    dropped = wa.fused_window_attention(query, key, value, layout, dropout=rate, seed=7)
    seen = probs > 0
    kept = dropped[seen] > 0
    torch.testing.assert_close(dropped[seen][kept], probs[seen][kept] / (1 - rate))
    assert abs((~kept).float().mean().item() - rate) < 0.03  # ~3000 seen entries: 3 sigma ~ 0.025
    again, other = (wa.fused_window_attention(query, key, value, layout, None, rate, n) for n in (7, 8))
    assert torch.equal(dropped, again) and not torch.equal(dropped, other)


def test_fused_dropout_gradcheck() -> None:
    types, mask = _batch([(3, 6), (4, 2)], 11)
    layout = wa.window_layout(types, mask, 2, False)
    inputs = [t.requires_grad_() for t in torch.randn(3, 2, 2, 11, 4, dtype=torch.float64)]
    valid = mask.bool()[:, None, :, None]

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return wa.fused_window_attention(q, k, v, layout, dropout=0.4, seed=11) * valid

    assert torch.autograd.gradcheck(attend, inputs)
