"""Analytic FLOPs of a reranker per model configuration (Fang et al., Scaling Laws for Dense Retrieval §5;
Kaplan et al. 2020, Table 1, re-derived for a bidirectional encoder). The measured side (timed profiles,
counted FLOPs) is :mod:`.measured_profiles`; the price of a model size built from both is :mod:`.cost_model`.

An encoder with L layers of width h (= heads x head dim) and FFN width i reads a sequence of s
tokens; every token attends to k keys. Counting 2 FLOPs per multiply-accumulate:

* dense matmuls, per layer and token: Q, K, V and output projections 4 h^2 MACs, the FFN
  m h i MACs (m = 2 matrices; m = 3 for a gated FFN). Their weights are the layer's matrix
  parameters P_layer, so the dense forward cost is 2 P per token with P = L P_layer ~= N, the
  non-embedding parameters (biases, layer norms and an unused pooler make N slightly larger);
* attention, per layer and token: scores q.k over k keys (h k MACs) and the weighted sum of k
  values (h k MACs): 4 h k FLOPs;
* the relevance head, once per sequence: [CLS] pooler + classifier 2 h^2 + 2 h, mean head 2 h.

    forward(s)  = s (2 P + 4 L h k) + head           (~= 2 N per token + attention term)
    training(s) = 3 forward(s)                         (~= 6 N per token)

since the backward pass takes a gradient for each operand of every matmul (2x the forward). Not
counted: embedding look-ups, layer norms, softmax, activations, biases (O(s h) per layer, <1%).

Keys per token k (:func:`keys_per_token`): full attention k = s. Windowed attention with window w
(Schlatt et al., Sparse Attention on Cross-Encoders eqs. 2-3, as ``window_attention.window_attention``
computes it): every token scores the G query-segment keys and a band of 2w + 1 document keys (the band has
that width whatever the edges), and the R dense rows ([CLS], or the whole query segment when the query sees
the document) are recomputed against all s keys, R s scores spread over s tokens: k = G + 2w + 1 + R.
A window w >= s - 1 counts as full attention.

Local layers (ModernBERT / Ettin: every layer but each ``global_attn_every_n_layers``-th attends
only to keys at most r = ``local_attention // 2`` positions away): a token scores at most
2r + 1 keys, on average ``band_keys(s, r) = (s (2r + 1) - r (r + 1)) / s`` (fewer at the edges),
and never more than the pattern's own k. That is the count the architecture needs and what a
sliding-window kernel (FlashAttention) computes; SDPA and eager attention compute the masked
dense s x s product instead (``dense_local=True``), which is what
:func:`.measured_profiles.flop_check` compares the counted FLOPs with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EncoderShape:
    """What the analytic FLOPs of a transformer encoder depend on."""

    layers: int
    hidden: int
    intermediate: int
    ffn_matrices: int = 2  # 3 for a gated (GLU) FFN, e.g. ModernBERT
    head: str = "cls"  # "cls": pooler + classifier; "mean": mean pooling + linear
    local_layers: int = 0  # layers with local (sliding-window) attention, e.g. ModernBERT's
    local_reach: int | None = None  # r: a local layer's token sees keys at most r positions away

    @property
    def matrix_params(self) -> int:
        """P: weights of the layers' dense matmuls, L (4 h^2 + m h i); the "N" of 2 N per token."""
        h = self.hidden
        return self.layers * (4 * h * h + self.ffn_matrices * h * self.intermediate)

    def head_flops(self) -> float:
        h = self.hidden
        return 2.0 * h * h + 2.0 * h if self.head == "cls" else 2.0 * h

    def attention_keys(self, seq_len: float, keys: float | None = None, dense_local: bool = False) -> float:
        """Keys per token summed over layers: global layers ``keys`` (default s), local layers
        at most the band (:func:`band_keys`); ``dense_local``: local layers as SDPA computes them."""
        keys = seq_len if keys is None else keys
        local = keys
        if self.local_layers and self.local_reach is not None and not dense_local:
            local = min(keys, band_keys(seq_len, self.local_reach))
        return (self.layers - self.local_layers) * keys + self.local_layers * local

    def forward_flops(self, seq_len: float, keys: float | None = None, dense_local: bool = False) -> float:
        """Forward FLOPs of one sequence of ``seq_len`` tokens, each attending to ``keys`` keys."""
        attention = 4.0 * self.hidden * self.attention_keys(seq_len, keys, dense_local)
        return seq_len * (2.0 * self.matrix_params + attention) + self.head_flops()

    def train_flops(self, seq_len: float, keys: float | None = None, dense_local: bool = False) -> float:
        """Forward + backward FLOPs of one sequence (backward = 2 x forward)."""
        return 3.0 * self.forward_flops(seq_len, keys, dense_local)

    @classmethod
    def from_hf_config(cls, config: Any, head: str = "cls") -> EncoderShape:
        """Shape of a Hugging Face encoder config (BERT-like; ModernBERT's gated FFN recognised)."""
        gated = getattr(config, "model_type", "") == "modernbert"
        layer_types = list(getattr(config, "layer_types", None) or [])
        local_layers = sum(kind == "sliding_attention" for kind in layer_types)
        return cls(
            layers=int(config.num_hidden_layers),
            hidden=int(config.hidden_size),
            intermediate=int(config.intermediate_size),
            ffn_matrices=3 if gated else 2,
            head=head,
            local_layers=local_layers,
            local_reach=int(config.sliding_window) if local_layers else None,
        )


def band_keys(seq_len: float, reach: int) -> float:
    """Mean keys per token of a band |i - j| <= r over s tokens: (s (2r + 1) - r (r + 1)) / s."""
    if reach >= seq_len - 1:
        return float(seq_len)
    return (seq_len * (2 * reach + 1) - reach * (reach + 1)) / seq_len


def keys_per_token(
    seq_len: float,
    window: int | None = None,
    query_tokens: float = 0.0,
    query_sees_document: bool = False,
) -> float:
    """Mean number of keys a token attends to: s (full) or G + 2w + 1 + R (window w; Schlatt et al., Sparse
    Attention on Cross-Encoders)."""
    if window is None or window >= seq_len - 1:
        return float(seq_len)
    dense_rows = query_tokens if query_sees_document else 1.0
    return float(query_tokens + 2 * max(window, 0) + 1 + dense_rows)


def window_of(attention: str) -> int | None:
    """``full`` -> None, ``window<w>`` -> w (the grid's attention variant names)."""
    if attention == "full":
        return None
    match = re.fullmatch(r"window(\d+)", attention)
    if not match:
        raise ValueError(f"unknown attention variant {attention!r}; use full or window<w>")
    return int(match.group(1))


def flops_per_token(
    non_embedding_params: float, layers: float, hidden: float, keys: float, training: bool = False
) -> float:
    """Kaplan-style approximation: forward 2 N + 4 L h k per token; training 3x (6 N + 12 L h k)."""
    forward = 2.0 * non_embedding_params + 4.0 * layers * hidden * keys
    return 3.0 * forward if training else forward
