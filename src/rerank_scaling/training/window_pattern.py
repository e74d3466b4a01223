"""The sparse cross-encoder's attention pattern (Schlatt et al., ECIR 2024, eqs. 2-3).

Which keys each token of ``[CLS] query [SEP] document [SEP]`` may attend to:

* [CLS] attends to every token;
* query tokens attend to the query segment ([CLS] query [SEP]) only, or to every token when
  ``query_sees_document`` is set;
* document tokens attend to the whole query segment and to document tokens at most ``w``
  positions away.

:func:`window_layout` derives it once per batch as per-token role bits (all the fused kernel reads;
the bits match ``kernels/window_attention/fused_attention.h``); :func:`dense_pattern_mask` is the
same pattern as a dense (B, S, S) mask, the O(S^2) formulation of the references and baselines.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

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
