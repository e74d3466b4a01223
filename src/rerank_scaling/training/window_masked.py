"""The window pattern as a mask: dense masked attention and FlexAttention (Schlatt et al., Sparse Attention on
Cross-Encoders, eq. 1 with a mask).

* :func:`masked_attention`: dense attention under a (B, S, S) mask, O(S^2): the reference the
  windowed passes are tested against, and what ModernBERT's local layers compute when windowed
  attention is selected (:mod:`.sparse_encoder`);
* :func:`flex_block_mask` / :func:`flex_window_attention`: the pattern as a FlexAttention block
  mask (``torch.nn.attention.flex_attention``), the formulation a PyTorch user would write today;
  the benchmark's baseline (``benchmarks/bench_window_attention.py``), not a dispatch target.
"""

from __future__ import annotations

from typing import Any

import torch

from rerank_scaling.training.window_ops import masked_softmax
from rerank_scaling.training.window_pattern import DENSE_KEY, DENSE_ROW, DOCUMENT, QUERY_KEY, WindowLayout


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
    return masked_softmax(scores, ~mask[:, None], value.dtype, 0.0) @ value
