"""Sparse cross-encoders: windowed attention swapped into a BERT-style encoder (seed paper 002).

Schlatt, Fröbe, Hagen, "Investigating the Effects of Sparse Attention on Cross-Encoders" (ECIR
2024), eqs. 1-3: [CLS] attends to every token, query tokens to the query segment (or to every
token with ``query_sees_document``), document tokens to the query segment and to the document
tokens at most ``w`` positions away, with one softmax over both pieces
(:func:`rerank_scaling.window_attention.window_attention`).

The patch keeps the weights and their names: each self-attention module gets a replacement
``forward`` that reuses its own ``query``/``key``/``value`` projections, and the encoder (the
module that owns ``embeddings`` and ``encoder``) gets a ``forward`` wrapper that derives the
pattern from ``token_type_ids`` (0: ``[CLS] query [SEP]``, 1: ``document [SEP]``) and
``attention_mask`` (0: right padding) once per forward pass. A wrapper rather than a forward
pre-hook, because sentence-transformers calls ``model.forward(...)`` directly, bypassing hooks.
``state_dict`` keys and ``config.json`` are unchanged, so a patched model saves as a plain
checkpoint; re-apply the patch after loading it::

    model = CrossEncoder(path)
    apply_window_attention(model.model, attention_variant_from_name("window4"))
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

from rerank_scaling.window_attention import WindowLayout, window_attention, window_layout

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


class _PatternState:
    """Shared by the patched layers of one encoder: the variant and the current batch's layout."""

    def __init__(self, variant: AttentionVariant, parameters: list[str]) -> None:
        self.variant = variant
        self.parameters = parameters  # the encoder's forward signature, to read positional arguments
        self.layout: WindowLayout | None = None

    def _argument(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in kwargs:
            return kwargs[name]
        index = self.parameters.index(name) if name in self.parameters else len(args)
        return args[index] if index < len(args) else None

    def capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The pattern of this batch, from the encoder's arguments. Kept until the next forward
        pass, so that gradient-checkpointed layers recomputed during backward still find it."""
        token_type_ids = self._argument("token_type_ids", args, kwargs)
        if token_type_ids is None:
            raise ValueError(
                f"{self.variant.name} attention needs token_type_ids (0: [CLS] query [SEP], 1: document)"
            )
        attention_mask = self._argument("attention_mask", args, kwargs)
        self.layout = window_layout(
            token_type_ids, attention_mask, self.variant.window, self.variant.query_sees_document
        )


def _capturing(forward: Callable[..., Any]) -> Callable[..., Any]:
    """An encoder ``forward`` that records the batch's pattern, then runs ``forward`` (same signature)."""

    @functools.wraps(forward)
    def capturing_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        self._window_state.capture(args, kwargs)
        return forward(self, *args, **kwargs)

    return capturing_forward


def _windowed_self_attention(
    self: nn.Module,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    past_key_values: Any = None,
    encoder_hidden_states: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Replacement ``BertSelfAttention.forward``: same projections, seed-002 pattern (eqs. 1-3).

    ``attention_mask`` (the encoder's extended mask) is ignored: padding is in the layout.
    hidden_states (B, S, hidden) -> (B, S, hidden); no attention weights are returned.
    """
    if past_key_values is not None or encoder_hidden_states is not None:
        raise NotImplementedError("windowed attention is for bidirectional encoders without a cache")
    layout = self._window_state.layout
    batch, length = hidden_states.shape[:2]
    if layout is None or layout.sparse_blocked.shape[0] != batch or layout.sparse_blocked.shape[2] != length:
        raise RuntimeError("windowed attention: no pattern for this batch (call the encoder, not a layer)")
    shape = (batch, length, -1, self.attention_head_size)
    query, key, value = (
        projection(hidden_states).view(shape).transpose(1, 2)  # (B, H, S, D)
        for projection in (self.query, self.key, self.value)
    )
    scaling = getattr(self, "scaling", self.attention_head_size**-0.5)
    dropout = self.dropout.p if self.training else 0.0
    out = window_attention(query, key, value, layout, scaling=scaling, dropout=dropout)
    return out.transpose(1, 2).reshape(batch, length, -1), None


def _find_encoder(model: nn.Module) -> nn.Module:
    """The BertModel-like module inside ``model``: the first that owns ``embeddings`` and ``encoder``."""
    for module in model.modules():
        if isinstance(getattr(module, "embeddings", None), nn.Module) and isinstance(
            getattr(module, "encoder", None), nn.Module
        ):
            return module
    raise TypeError(f"no BERT-style encoder (embeddings + encoder) inside {type(model).__name__}")


def _is_self_attention(module: nn.Module) -> bool:
    return (
        all(isinstance(getattr(module, name, None), nn.Linear) for name in ("query", "key", "value"))
        and hasattr(module, "attention_head_size")
        and "Cross" not in type(module).__name__
    )


def apply_window_attention(model: nn.Module, variant: AttentionVariant) -> nn.Module:
    """Swap the seed-002 windowed attention into every self-attention layer of ``model``, in place.

    ``model``: a Hugging Face BERT-style model (``CrossEncoder(...).model``: a
    ``BertForSequenceClassification`` or a bare ``BertModel``). Applying again replaces the
    variant. Returns ``model``.
    """
    encoder = _find_encoder(model)
    layers = [module for module in encoder.modules() if _is_self_attention(module)]
    if not layers:
        raise TypeError(f"no BERT-style self-attention layers inside {type(encoder).__name__}")
    state = _PatternState(variant, list(inspect.signature(type(encoder).forward).parameters)[1:])
    for module in (encoder, *layers):
        module._window_state = state
    encoder.forward = MethodType(_capturing(type(encoder).forward), encoder)
    for layer in layers:
        layer.forward = MethodType(_windowed_self_attention, layer)
    return model
