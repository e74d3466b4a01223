"""Windowed self-attention for cross-encoders: the fused kernel, banded products, references, the pattern.

Seed paper: Schlatt, Fröbe, Hagen, "Investigating the Effects of Sparse Attention on
Cross-Encoders" (ECIR 2024). Attention is the softmax of scaled dot products (eq. 1); the sparse
cross-encoder restricts which keys each token sees (eqs. 2-3):

* [CLS] attends to every token;
* query tokens attend to the query segment ([CLS] query [SEP]) only, or to every token when
  ``query_sees_document`` is set;
* document tokens attend to the whole query segment and to document tokens at most ``w``
  positions away.

On CPU, ``window_attention`` runs the fused kernel (``kernels/window_attention/cpu/
fused_attention_cpu.cpp``): scores over each row's allowed keys, an online softmax and the
weighted sum in one pass over tiles (FlashAttention, Dao et al. 2022), saving only the output and
one log-sum-exp per row; the backward recomputes the probabilities. Memory O(S D), time
O(S (G + 2w + 1) D).

The reference path (and the CUDA path) computes the document-to-document part as a band of
``2w + 1`` diagonals with two compiled products, each with an explicit backward:

* ``window_qk``: ``(..., s, d) x (..., s, d) -> (..., s, 2w+1)``, ``band[i, j] = q_i . k_{i+j-w}``,
  zero where ``i + j - w`` lies outside ``[0, s)``;
* ``window_av``: ``(..., s, 2w+1) x (..., s, d) -> (..., s, d)``, ``out_i = sum_j band[i, j] v_{i+j-w}``.

The extension is built ahead of time (``scripts/install.sh`` when a config asks for windowed
attention) or on first use, into a directory keyed by torch, CUDA and the target architectures; a
build that fails falls back to the reference path (:mod:`.extension_build`)::

    python -m rerank_scaling.training.extension_build
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx, once_differentiable

from rerank_scaling.training.extension_build import kernels_on, load_kernels

# --- the compiled extension (built and loaded by .extension_build) ------------------------------


def _has_kernel(tensor: torch.Tensor) -> bool:
    """Whether the compiled ops run on ``tensor``'s device (else the PyTorch reference is used)."""
    return kernels_on(tensor.device.type)


# --- reference implementations ------------------------------------------------------------------


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


# --- autograd functions over the compiled ops ---------------------------------------------------


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


# --- the cross-encoder attention pattern (seed paper eqs. 1-3) ----------------------------------


QUERY_KEY, DOCUMENT, DENSE_KEY, DENSE_ROW = 1, 2, 4, 8  # role bits, as in fused_attention.h


@dataclass(frozen=True)
class WindowLayout:
    """Which keys each token may attend to, derived once per batch (shared by all layers).

    B batch, S tokens, G global keys (positions ``[0, G)`` hold every query-segment token),
    R dense rows (``[CLS]``, or the query segment when ``query_sees_document``), W = 2w + 1.
    ``roles`` is all the fused kernel reads; the reference path's masks (``True`` where attention
    is *blocked*) are derived from it on first use, so the fused path never allocates them.
    """

    window: int  # w, clamped to S - 1 (a wider band only adds zeros)
    global_keys: int  # G
    dense_rows: int  # R
    roles: torch.Tensor  # (B, S) uint8: QUERY_KEY | DOCUMENT | DENSE_KEY | DENSE_ROW bits per token

    def _has(self, bit: int) -> torch.Tensor:
        return (self.roles & bit) != 0

    @functools.cached_property
    def sparse_blocked(self) -> torch.Tensor:
        """(B, 1, S, G + W): global keys first, then the band (keys ``i - w ... i + w``)."""
        is_query, is_document = self._has(QUERY_KEY), self._has(DOCUMENT)
        batch, length = self.roles.shape
        g, w = self.global_keys, self.window
        near = F.pad(is_document.to(torch.uint8), (w, w)).unfold(-1, 2 * w + 1, 1).bool()
        band = is_document[:, :, None] & near
        seen = torch.cat([is_query[:, None, :g].expand(batch, length, g), band], dim=-1)
        return ~seen[:, None]

    @functools.cached_property
    def dense_blocked(self) -> torch.Tensor:
        """(B, 1, 1, S): keys hidden from the dense rows (padding)."""
        return ~self._has(DENSE_KEY)[:, None, None, :]

    @functools.cached_property
    def dense_row(self) -> torch.Tensor:
        """(B, 1, R, 1): row i < R attends densely."""
        return self._has(DENSE_ROW)[:, None, : self.dense_rows, None]


def _token_roles(
    token_type_ids: torch.Tensor, attention_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, S) masks: query segment (type 0; position 0 always), document (type 1), non-padding."""
    if attention_mask is None:
        valid = torch.ones_like(token_type_ids, dtype=torch.bool)
    else:
        valid = attention_mask != 0
    is_query = (token_type_ids == 0) & valid
    is_query[:, 0] = True  # [CLS]: keeps at least one visible key in every row
    return is_query, (token_type_ids != 0) & valid, valid


def window_layout(
    token_type_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    window: int,
    query_sees_document: bool = False,
) -> WindowLayout:
    """The sparse pattern (seed paper eqs. 2-3) of a batch of ``[CLS] query [SEP] document [SEP]``.

    ``token_type_ids`` (B, S): 0 for the query segment, 1 for the document; ``attention_mask``
    (B, S): 1 for tokens, 0 for padding (None: no padding).
    """
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    is_query, is_document, valid = _token_roles(token_type_ids, attention_mask)
    batch, length = token_type_ids.shape
    window = min(window, max(length - 1, 0))
    positions = torch.arange(1, length + 1, device=token_type_ids.device)
    global_keys = int((is_query * positions).amax())  # one host sync per forward pass, not per layer
    dense_rows = global_keys if query_sees_document else 1
    dense_row = is_query if query_sees_document else F.pad(is_query[:, :1], (0, length - 1))
    roles = (
        is_query * QUERY_KEY
        + is_document * DOCUMENT
        + (valid | is_query) * DENSE_KEY
        + (dense_row & (positions <= dense_rows)) * DENSE_ROW
    ).to(torch.uint8)
    return WindowLayout(window=window, global_keys=global_keys, dense_rows=dense_rows, roles=roles)


def dense_pattern_mask(
    token_type_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    window: int,
    query_sees_document: bool = False,
) -> torch.Tensor:
    """The same pattern as ``window_layout`` as a dense (B, S, S) boolean mask (True = attend).

    The O(S^2) formulation used by the references and the benchmark's dense baselines.
    """
    is_query, is_document, valid = _token_roles(token_type_ids, attention_mask)
    positions = torch.arange(token_type_ids.size(1), device=token_type_ids.device)
    dense_row = positions[None, :] == 0
    if query_sees_document:
        dense_row = dense_row | is_query
    near = (positions[:, None] - positions[None, :]).abs() <= window
    return (
        (dense_row[:, :, None] & (valid | is_query)[:, None, :])
        | is_query[:, None, :]
        | (is_document[:, :, None] & is_document[:, None, :] & near)
    )


def _softmax(scores: torch.Tensor, blocked: torch.Tensor, dtype: torch.dtype, dropout: float) -> torch.Tensor:
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
    probs = _softmax(scores, layout.sparse_blocked, value.dtype, dropout)
    out = probs[..., :g] @ value[..., :g, :] + window_av(probs[..., g:], value, w)
    dense_scores = query[..., :r, :] @ key.transpose(-1, -2)  # (B, H, R, S)
    dense_probs = _softmax(dense_scores, layout.dense_blocked, value.dtype, dropout)
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


def window_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: WindowLayout,
    scaling: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Sparse cross-encoder attention, (B, H, S, D) x 3 -> (B, H, S, D) (seed paper eqs. 1-3).

    [CLS] (and the query, with ``query_sees_document``) attends to every token, query tokens to the
    query segment, document tokens to the query segment and the document tokens within ``w``; one
    softmax per row over all its keys, so the result equals dense attention under
    ``dense_pattern_mask``. ``dropout``: on the attention probabilities (pass 0 in eval mode).
    On CPU: the fused kernel (``fused_window_attention``, memory O(S D)); on CUDA the two-product
    path (``window_attention_reference``; a fused CUDA kernel is not written).
    """
    if query.device.type == "cpu" and kernels_on("cpu"):
        return fused_window_attention(query, key, value, layout, scaling, dropout)
    return window_attention_reference(query, key, value, layout, scaling, dropout)


def flex_block_mask(layout: WindowLayout) -> Any:
    """The layout's pattern as a FlexAttention block mask (``torch.nn.attention.flex_attention``),
    the formulation a PyTorch user would write today; built once per batch like the layout."""
    from torch.nn.attention.flex_attention import create_block_mask

    roles, window = layout.roles.int(), layout.window
    batch, length = roles.shape

    def seen(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        row, key = roles[b, q], roles[b, kv]
        band = ((row & DOCUMENT) != 0) & ((key & DOCUMENT) != 0) & ((q - kv).abs() <= window)
        return torch.where((row & DENSE_ROW) != 0, (key & DENSE_KEY) != 0, ((key & QUERY_KEY) != 0) | band)

    return create_block_mask(seen, batch, None, length, length, device=roles.device)


_FLEX: list[Any] = []


def flex_window_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: Any, scaling: float | None = None
) -> torch.Tensor:
    """FlexAttention (compiled once per process) over ``flex_block_mask(layout)``: the baseline."""
    if not _FLEX:
        from torch.nn.attention.flex_attention import flex_attention

        _FLEX.append(torch.compile(flex_attention))
    return _FLEX[0](query, key, value, block_mask=block_mask, scale=scaling)


def masked_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scaling: float | None = None,
) -> torch.Tensor:
    """Dense reference (seed paper eq. 1 with a mask): (B, H, S, D) x 3, mask (B, S, S) -> (B, H, S, D)."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = (query * scaling) @ key.transpose(-1, -2)
    return _softmax(scores, ~mask[:, None], value.dtype, 0.0) @ value


def main(argv: list[str] | None = None) -> None:
    """``--build``: the ahead-of-time build (:func:`.extension_build.main`), kept for old commands."""
    from rerank_scaling.training.extension_build import main as build_main

    build_main([arg for arg in (argv if argv is not None else sys.argv[1:]) if arg != "--build"])


if __name__ == "__main__":
    main()
