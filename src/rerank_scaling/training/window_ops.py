"""Windowed attention's operations: the banded products and the two attention passes, each with
its PyTorch reference (Schlatt et al., ECIR 2024, eq. 1 over the pattern of eqs. 2-3).

The banded products (``kernels/window_attention/cpu/window_matmul_cpu.cpp`` and its CUDA twin),
each a ``torch.autograd.Function`` with an explicit backward, a vectorised reference (unfold +
einsum) and a plain-loop definition (tests only):

* ``window_qk``: ``(..., s, d) x (..., s, d) -> (..., s, 2w+1)``, ``band[i, j] = q_i . k_{i+j-w}``,
  zero where ``i + j - w`` lies outside ``[0, s)``;
* ``window_av``: ``(..., s, 2w+1) x (..., s, d) -> (..., s, d)``, ``out_i = sum_j band[i, j] v_{i+j-w}``.

The attention passes over a :class:`~.window_pattern.WindowLayout`:

* :func:`window_attention_reference`: the two-product formulation (global keys, then the band),
  which materialises the (B, H, S, G + 2w + 1) scores; the CUDA path and the fused kernel's reference;
* :func:`fused_window_attention`: the fused CPU kernel (``cpu/fused_attention_cpu.cpp``): scores
  over each row's allowed keys, an online softmax and the weighted sum in one pass over tiles
  (FlashAttention, Dao et al. 2022), saving only the output and one log-sum-exp per row; the
  backward recomputes the probabilities. Memory O(S D), time O(S (G + 2w + 1) D).

The compiled ops come from :mod:`rerank_scaling.compute.extension_build`; where they are not built,
the products fall back to their references.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx, once_differentiable

from rerank_scaling.compute.extension_build import kernels_on, load_kernels
from rerank_scaling.training.window_pattern import WindowLayout


def _has_kernel(tensor: torch.Tensor) -> bool:
    """Whether the compiled ops run on ``tensor``'s device (else the PyTorch reference is used)."""
    return kernels_on(tensor.device.type)


# --- reference implementations of the banded products -------------------------------------------


def _windows(x: torch.Tensor, window: int) -> torch.Tensor:
    """(..., s, d) -> (..., s, d, 2w+1) view: ``[..., i, :, j] = x[..., i + j - w, :]``, zero-padded."""
    return F.pad(x, (0, 0, window, window)).unfold(-2, 2 * window + 1, 1)


def window_qk_reference(query: torch.Tensor, key: torch.Tensor, window: int) -> torch.Tensor:
    """Vectorised ``window_qk`` (unfold + einsum): (..., s, d) x (..., s, d) -> (..., s, 2w+1)."""
    return torch.einsum("...sd,...sdj->...sj", query, _windows(key, window))


def window_av_reference(band: torch.Tensor, value: torch.Tensor, window: int) -> torch.Tensor:
    """Vectorised ``window_av`` (unfold + einsum): (..., s, 2w+1) x (..., s, d) -> (..., s, d)."""
    return torch.einsum("...sj,...sdj->...sd", band, _windows(value, window))


def window_qk_loop(query: torch.Tensor, key: torch.Tensor, window: int) -> torch.Tensor:
    """Plain-loop ``window_qk``, the definition spelled out (tests only: O(s w) Python steps)."""
    length = query.size(-2)
    band = query.new_zeros(*query.shape[:-1], 2 * window + 1)
    for i in range(length):
        for j in range(2 * window + 1):
            if 0 <= i + j - window < length:
                band[..., i, j] = (query[..., i, :] * key[..., i + j - window, :]).sum(-1)
    return band


def window_av_loop(band: torch.Tensor, value: torch.Tensor, window: int) -> torch.Tensor:
    """Plain-loop ``window_av``, the definition spelled out (tests only)."""
    length = value.size(-2)
    out = torch.zeros_like(value)
    for i in range(length):
        for j in range(2 * window + 1):
            if 0 <= i + j - window < length:
                out[..., i, :] += band[..., i, j, None] * value[..., i + j - window, :]
    return out


# --- autograd functions over the compiled banded products ---------------------------------------


class WindowQK(torch.autograd.Function):
    """``band = window_qk(q, k, w)``: (..., s, d) x (..., s, d) -> (..., s, 2w+1).

    ``band[i, j] = q_i . k_{i+j-w}`` (zero outside the sequence). Backward:
    ``dq = window_av(g, k)`` and ``dk[t] = sum_j g[t+w-j, j] q_{t+w-j}`` (the transposed band).
    """

    @staticmethod
    def forward(ctx: FunctionCtx, query: torch.Tensor, key: torch.Tensor, window: int) -> torch.Tensor:
        ctx.save_for_backward(query, key)
        ctx.window = window
        return load_kernels().window_qk(query, key, window)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        query, key = ctx.saved_tensors
        grad_query, grad_key = load_kernels().window_qk_backward(grad, query, key, ctx.window)
        return grad_query, grad_key, None


class WindowAV(torch.autograd.Function):
    """``out = window_av(p, v, w)``: (..., s, 2w+1) x (..., s, d) -> (..., s, d).

    ``out_i = sum_j p[i, j] v_{i+j-w}``. Backward: ``dp = window_qk(g, v)`` and
    ``dv[t] = sum_j p[t+w-j, j] g_{t+w-j}`` (the transposed band).
    """

    @staticmethod
    def forward(ctx: FunctionCtx, band: torch.Tensor, value: torch.Tensor, window: int) -> torch.Tensor:
        ctx.save_for_backward(band, value)
        ctx.window = window
        return load_kernels().window_av(band, value, window)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        band, value = ctx.saved_tensors
        grad_band, grad_value = load_kernels().window_av_backward(grad, band, value, ctx.window)
        return grad_band, grad_value, None


def window_qk(query: torch.Tensor, key: torch.Tensor, window: int) -> torch.Tensor:
    """Banded ``q k^T``: (..., s, d) x (..., s, d) -> (..., s, 2w+1); compiled where available."""
    dtype = torch.promote_types(query.dtype, key.dtype)
    query, key = query.to(dtype), key.to(dtype)
    if _has_kernel(query):
        return WindowQK.apply(query, key, window)
    return window_qk_reference(query, key, window)


def window_av(band: torch.Tensor, value: torch.Tensor, window: int) -> torch.Tensor:
    """Banded ``p v``: (..., s, 2w+1) x (..., s, d) -> (..., s, d); compiled where available."""
    dtype = torch.promote_types(band.dtype, value.dtype)
    band, value = band.to(dtype), value.to(dtype)
    if _has_kernel(value):
        return WindowAV.apply(band, value, window)
    return window_av_reference(band, value, window)


# --- the attention passes over the pattern (seed paper eqs. 1-3) --------------------------------


def masked_softmax(
    scores: torch.Tensor, blocked: torch.Tensor, dtype: torch.dtype, dropout: float
) -> torch.Tensor:
    """Masked softmax over the last dim, in at least float32; dropout on the probabilities."""
    compute = torch.promote_types(scores.dtype, torch.float32)
    probs = scores.masked_fill(blocked, float("-inf")).softmax(-1, dtype=compute).to(dtype)
    return F.dropout(probs, dropout) if dropout > 0 else probs


def window_attention_reference(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: WindowLayout,
    scaling: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """The two-product formulation of ``window_attention`` (the reference for the fused kernel).

    Every row takes ONE softmax over the concatenation of its global scores (keys ``[0, G)``, the
    query segment) and its band scores (document keys within ``w``), so the probabilities match
    dense attention under ``dense_pattern_mask``. The R dense rows ([CLS], and the query with
    ``query_sees_document``) are recomputed against all S keys, O(R S). Cost O(S (G + 2w + 1) D)
    time, and the (B, H, S, G + 2w + 1) scores and probabilities are materialised.
    ``dropout`` is applied to the attention probabilities (pass 0 in eval mode).
    """
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    g, w, r = layout.global_keys, layout.window, layout.dense_rows
    query = query * scaling
    scores = torch.cat([query @ key[..., :g, :].transpose(-1, -2), window_qk(query, key, w)], dim=-1)
    probs = masked_softmax(scores, layout.sparse_blocked, value.dtype, dropout)
    out = probs[..., :g] @ value[..., :g, :] + window_av(probs[..., g:], value, w)
    dense_scores = query[..., :r, :] @ key.transpose(-1, -2)  # (B, H, R, S)
    dense_probs = masked_softmax(dense_scores, layout.dense_blocked, value.dtype, dropout)
    head = torch.where(layout.dense_row, dense_probs @ value, out[..., :r, :])
    return torch.cat([head, out[..., r:, :]], dim=-2)


class FusedWindowAttention(torch.autograd.Function):
    """``out = fused_attention(q, k, v)`` over the layout's pattern: (B, H, S, D) x 3 -> (B, H, S, D).

    One pass per row tile with an online softmax (FlashAttention, Dao et al. 2022, Alg. 1); saves
    only q, k, v, the output and one log-sum-exp per row, and the backward recomputes the
    probabilities (FlashAttention-2 backward). Memory O(S D) beyond the inputs, time
    O(S (G + 2w + 1) D). Dropout on the probabilities uses a hashed mask, regenerated in the
    backward from ``seed``.
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        roles: torch.Tensor,
        pattern: tuple[int, int, float, float, int],  # G, w, scaling, dropout, seed
    ) -> torch.Tensor:
        out, logsumexp = load_kernels().fused_attention(query, key, value, roles, *pattern)
        ctx.save_for_backward(query, key, value, out, logsumexp, roles)
        ctx.pattern = pattern
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        query, key, value, out, logsumexp, roles = ctx.saved_tensors
        grads = load_kernels().fused_attention_backward(
            _unit_stride(grad), query, key, value, out, logsumexp, roles, *ctx.pattern
        )
        return (*grads, None, None)


def _unit_stride(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` itself when its last dimension has stride 1 (the kernel's only layout demand)."""
    return tensor if tensor.stride(-1) == 1 else tensor.contiguous()


def fused_window_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: WindowLayout,
    scaling: float | None = None,
    dropout: float = 0.0,
    seed: int | None = None,
) -> torch.Tensor:
    """The compiled fused pass (CPU): the function of ``window_attention_reference``.

    With ``dropout`` > 0 the mask is drawn from a hash of ``seed`` (default: drawn from torch's
    generator, so ``torch.manual_seed`` makes it reproducible), not from torch's dropout stream.
    """
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,))) if dropout > 0 else 0
    dtype = torch.promote_types(torch.promote_types(query.dtype, key.dtype), value.dtype)
    query, key, value = (_unit_stride(t.to(dtype)) for t in (query, key, value))
    pattern = (max(layout.global_keys, 1), layout.window, float(scaling), float(dropout), seed)
    return FusedWindowAttention.apply(query, key, value, layout.roles, pattern)
