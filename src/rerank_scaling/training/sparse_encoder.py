"""Sparse cross-encoders: the seed-002 windowed attention as a registered attention function.

Schlatt, Fröbe, Hagen, "Investigating the Effects of Sparse Attention on Cross-Encoders" (ECIR
2024), eqs. 1-3: [CLS] attends to every token, query tokens to the query segment (or to every
token with ``query_sees_document``), document tokens to the query segment and to the document
tokens at most ``w`` positions away, with one softmax over both pieces
(:func:`rerank_scaling.training.window_attention.window_attention`).

One path for every family. transformers' attention modules (``BertSelfAttention``,
``ModernBertAttention``, ...) project queries/keys/values, apply their own position encoding
(ModernBERT: rotary, inside the module) and then call the function named by
``config._attn_implementation`` in ``ALL_ATTENTION_FUNCTIONS``. We register
:data:`ATTENTION_NAME` there and select it with ``set_attn_implementation``, so projections,
rotary embeddings, scaling and the output projection stay the model's own; only the
softmax(QK^T)V step is replaced. ``state_dict`` keys are unchanged and ``config.json`` does not
store the choice, so a patched model saves as a plain checkpoint; re-apply after loading it::

    model = CrossEncoder(path)
    apply_window_attention(model.model, attention_variant_from_name("window4"))

The pattern of a batch is derived once per forward pass by a wrapper around the encoder's
``forward`` (a wrapper, not a pre-hook: sentence-transformers calls ``model.forward`` directly):

* segments: ``token_type_ids`` (0: ``[CLS] query [SEP]``, 1: ``document [SEP]``) when the family
  has token-type embeddings (BERT; then they are required); otherwise (ModernBERT/Ettin, whose
  tokenizer emits none) from the separator: every token after the first ``config.sep_token_id``
  is document (:func:`segments_from_separator`);
* padding: ``attention_mask``.

ModernBERT alternates global layers with local layers that already restrict every token to keys
at most ``config.sliding_window`` (``local_attention // 2``) positions away. The seed pattern is
a restriction of *what a layer may see*, so on a local layer it applies on top of the local
window: the effective mask is the intersection (pattern AND local window), never the union.
Widening a local layer to the pattern's far query keys would show the pretrained weights an
attention range they were never trained with, whereas the intersection only removes keys, as the
pattern does on global layers. With ``w >= length`` and ``query_sees_document`` the pattern
admits everything, and the patched model equals the unpatched one layer by layer (the
equivalence test). Global layers use the banded :func:`window_attention` (O(S (G + 2w + 1)));
local layers, whose mask is no longer a layout of that function, use the dense masked reference
:func:`masked_attention` (O(S^2), as ModernBERT's own SDPA path is); attention dropout there is not
supported (Ettin trains with ``attention_dropout = 0``).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import MethodType
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface

from rerank_scaling.training.window_attention import (
    WindowLayout,
    dense_pattern_mask,
    masked_attention,
    window_attention,
    window_layout,
)

ATTENTION_NAME = "rerank_window"  # the key in transformers' ALL_ATTENTION_FUNCTIONS
_NAME = re.compile(r"^window([0-9]+)$")


@dataclass(frozen=True)
class AttentionVariant:
    """A sparse attention pattern: document window ``w`` and whether query tokens see the document."""

    window: int
    query_sees_document: bool = False

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"window must be >= 0, got {self.window}")

    @property
    def name(self) -> str:
        return f"window{self.window}"


def attention_variant_from_name(name: str) -> AttentionVariant:
    """``"window<w>"`` (config ``training.attention``) -> ``AttentionVariant(w)``; "full" needs no patch."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"training.attention: {name!r} is not a windowed variant (window<w>, e.g. window4)")
    return AttentionVariant(int(match.group(1)))


def segments_from_separator(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, sep_token_id: int
) -> torch.Tensor:
    """(B, S) token types from the separator: 0 up to and including the first ``[SEP]``, 1 after.

    ``[CLS] query [SEP] document [SEP] <pad>`` -> ``0 0..0 0 1..1 1 1``; padding is 1 but hidden
    by ``attention_mask``. A row without a separator is all query (no document tokens).
    """
    is_sep = (input_ids == sep_token_id).long()
    after_first = (is_sep.cumsum(dim=1) - is_sep) > 0
    types = after_first.long()
    if attention_mask is not None:
        types = types * (attention_mask != 0).long()
    return types


class _PatternState:
    """Shared by the attention modules of one encoder: the variant and the current batch's pattern."""

    def __init__(self, variant: AttentionVariant, parameters: list[str], sep_token_id: int | None) -> None:
        self.variant = variant
        self.parameters = parameters  # the encoder's forward signature, to read positional arguments
        self.sep_token_id = sep_token_id  # segments from [SEP] when the family has no token types
        self._segments: tuple[torch.Tensor, torch.Tensor | None] | None = None
        self._local: dict[int, torch.Tensor] = {}

    def _argument(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in kwargs:
            return kwargs[name]
        index = self.parameters.index(name) if name in self.parameters else len(args)
        return args[index] if index < len(args) else None

    def capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The pattern of this batch, from the encoder's arguments. Kept until the next forward
        pass, so that gradient-checkpointed layers recomputed during backward still find it."""
        attention_mask = self._argument("attention_mask", args, kwargs)
        if "token_type_ids" in self.parameters:
            token_type_ids = self._argument("token_type_ids", args, kwargs)
            if token_type_ids is None:
                raise ValueError(
                    f"{self.variant.name} attention needs token_type_ids (0: [CLS] query [SEP], 1: document)"
                )
        else:
            input_ids = self._argument("input_ids", args, kwargs)
            if input_ids is None or self.sep_token_id is None:
                raise ValueError(
                    f"{self.variant.name} attention needs input_ids and config.sep_token_id to find the "
                    "query/document boundary of a family without token_type_ids"
                )
            token_type_ids = segments_from_separator(input_ids, attention_mask, self.sep_token_id)
        self._segments = (token_type_ids, attention_mask)
        self._local = {}

    @property
    def layout(self) -> WindowLayout | None:
        """This batch's layout, derived again by every layer (O(S) work) rather than kept: nothing
        of the pattern stays allocated while the feed-forward layers, which set the peak, run."""
        if self._segments is None:
            return None
        token_type_ids, attention_mask = self._segments
        return window_layout(
            token_type_ids, attention_mask, self.variant.window, self.variant.query_sees_document
        )

    def local_mask(self, reach: int) -> torch.Tensor:
        """(B, S, S) True = attend: the seed pattern AND ``|i - j| <= reach`` (a local layer).

        Every token also sees itself: valid tokens already do, and a padding row far from the
        query segment would otherwise see nothing (a NaN row that 0 * NaN spreads to valid rows).
        """
        if reach not in self._local:
            token_type_ids, attention_mask = self._segments  # type: ignore[misc]
            pattern = dense_pattern_mask(
                token_type_ids, attention_mask, self.variant.window, self.variant.query_sees_document
            )
            positions = torch.arange(token_type_ids.size(1), device=token_type_ids.device)
            distance = (positions[:, None] - positions[None, :]).abs()
            self._local[reach] = (pattern & (distance <= reach)) | (distance == 0)
        return self._local[reach]


def _capturing(forward: Callable[..., Any]) -> Callable[..., Any]:
    """An encoder ``forward`` that records the batch's pattern, then runs ``forward`` (same signature)."""

    @functools.wraps(forward)
    def capturing_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        self._window_state.capture(args, kwargs)
        return forward(self, *args, **kwargs)

    return capturing_forward


def windowed_attention_function(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The registered attention function (transformers' ``AttentionInterface`` signature).

    query/key/value (B, H, S, D), already projected and position-encoded by ``module`` ->
    (B, S, H, D). ``attention_mask`` (the model's own, None for an unregistered mask name) is
    ignored: padding is in the pattern. A non-None ``sliding_window`` marks a ModernBERT local
    layer; its reach is ``config.sliding_window`` (the model passes the flash-attention inclusive
    bound, one more).
    """
    state: _PatternState | None = getattr(module, "_window_state", None)
    batch, _, length, _ = query.shape
    layout = None if state is None else state.layout
    if layout is None or tuple(layout.roles.shape) != (batch, length):  # roles only: no reference masks
        raise RuntimeError(
            f"{ATTENTION_NAME} attention in {type(module).__name__}: no pattern for this batch "
            "(call the encoder, not a layer, after apply_window_attention)"
        )
    if key.shape[-2] != length:
        raise NotImplementedError("windowed attention is for bidirectional encoders without a cache")
    if sliding_window is None:
        out = window_attention(query, key, value, layout, scaling=scaling, dropout=dropout)
    else:
        if dropout > 0:
            raise NotImplementedError("windowed attention on local layers has no attention dropout")
        out = masked_attention(
            query, key, value, state.local_mask(int(module.config.sliding_window)), scaling
        )
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION_NAME, windowed_attention_function)


def _find_encoder(model: nn.Module) -> nn.Module:
    """The base encoder inside ``model`` (BertModel, ModernBertModel): the first owning ``embeddings``."""
    for module in model.modules():
        if isinstance(getattr(module, "embeddings", None), nn.Module):
            return module
    raise TypeError(f"no encoder (a module owning `embeddings`) inside {type(model).__name__}")


def _attention_modules(encoder: nn.Module) -> list[nn.Module]:
    """Modules that call the attention function: those with ``is_causal`` (the attribute the
    interface's SDPA path reads), bidirectional, not cross-attention."""
    return [
        module
        for module in encoder.modules()
        if getattr(module, "is_causal", None) is False and "Cross" not in type(module).__name__
    ]


def apply_window_attention(model: nn.Module, variant: AttentionVariant) -> nn.Module:
    """Select the seed-002 windowed attention for every self-attention layer of ``model``, in place.

    ``model``: a Hugging Face encoder whose attention goes through ``ALL_ATTENTION_FUNCTIONS``
    (``CrossEncoder(...).model``: ``BertForSequenceClassification``,
    ``ModernBertForSequenceClassification``, or a bare ``BertModel``/``ModernBertModel``).
    Applying again replaces the variant. Returns ``model``.
    """
    encoder = _find_encoder(model)
    pretrained = next(m for m in model.modules() if hasattr(m, "set_attn_implementation"))
    if not pretrained._can_set_attn_implementation():
        raise TypeError(
            f"{type(pretrained).__name__} does not route attention through transformers' "
            "AttentionInterface; windowed attention cannot be selected for this family"
        )
    layers = _attention_modules(encoder)
    if not layers:
        raise TypeError(f"no bidirectional self-attention layers inside {type(encoder).__name__}")
    parameters = list(inspect.signature(type(encoder).forward).parameters)[1:]
    state = _PatternState(variant, parameters, getattr(encoder.config, "sep_token_id", None))
    for module in (encoder, *layers):
        module._window_state = state
    encoder.forward = MethodType(_capturing(type(encoder).forward), encoder)
    pretrained.set_attn_implementation(ATTENTION_NAME)
    return model
