"""Windowed self-attention for cross-encoders: the entry point and the import surface.

Seed paper: Schlatt, Fröbe, Hagen, "Investigating the Effects of Sparse Attention on
Cross-Encoders" (ECIR 2024). Attention is the softmax of scaled dot products (eq. 1); the sparse
cross-encoder restricts which keys each token sees (eqs. 2-3). The rooms, one job each:

* :mod:`.window_pattern`: the pattern (:func:`window_layout`, :class:`WindowLayout`,
  :func:`dense_pattern_mask`);
* :mod:`.window_ops`: the compiled banded products and the fused pass, with their autograd
  functions and PyTorch references (:func:`window_qk`, :func:`window_av`,
  :func:`fused_window_attention`, :func:`window_attention_reference`);
* :mod:`.window_masked`: the pattern as a mask (:func:`masked_attention`, FlexAttention);
* :mod:`rerank_scaling.compute.extension_build`: building and loading ``kernels/window_attention`` (its CLI,
  ``python -m rerank_scaling.compute.extension_build``); a build that fails falls back to the
  reference path.

This module holds the dispatch, :func:`window_attention`, and re-exports the names above, so
``from rerank_scaling.training.window_attention import window_layout, window_attention`` keeps
working.
"""

from __future__ import annotations

import torch

from rerank_scaling.compute.extension_build import kernels_on
from rerank_scaling.training.window_masked import flex_block_mask, flex_window_attention, masked_attention
from rerank_scaling.training.window_ops import (
    fused_window_attention,
    window_attention_reference,
    window_av,
    window_qk,
)
from rerank_scaling.training.window_pattern import WindowLayout, dense_pattern_mask, window_layout

__all__ = [
    "WindowLayout",
    "dense_pattern_mask",
    "flex_block_mask",
    "flex_window_attention",
    "fused_window_attention",
    "masked_attention",
    "window_attention",
    "window_attention_reference",
    "window_av",
    "window_layout",
    "window_qk",
]


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
