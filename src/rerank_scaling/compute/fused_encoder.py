"""A BERT encoder's scoring forward on a CPU with each GEMM fused with its neighbours by oneDNN: the
evaluation's bf16 path (:func:`rerank_scaling.evaluation.rerank.model_scores`) where it applies, and its
fp32 path on the CPU kinds where that was measured to pay.

What limits the eager bf16 forward on a CPU with AMX is not its GEMMs but the kernels between them
(``benchmarks/results/cpu_peak_amx.md``: at hidden size 384 and 48 tokens, GELU, residual adds, casts
and copies take as long as the GEMMs' share). Per encoder layer of BERT (Devlin et al. 2019, the
post-LN Transformer encoder of Vaswani et al. 2017) this path runs:

* the query, key and value projections as one GEMM, their weights concatenated (three in eager);
* attention over the projections' packed output: the compiled kernel
  ``torch.ops.window_attention.packed_attention`` (``kernels/window_attention/packed_attention.h``:
  dense, short sequences, scores in registers, output written in the layout the next GEMM reads)
  where the extension is built here (:func:`encoder_kernels`), else PyTorch's
  ``scaled_dot_product_attention`` with the padding mask (as eager's SDPA);
* the attention output projection with its bias and the residual added in one oneDNN primitive
  (post-op ``add``), then the layer norm (the compiled ``row_layer_norm`` where built, else
  PyTorch's);
* the intermediate projection with its bias and GELU (erf) in one primitive (post-op ``gelu``);
* the output projection with its bias and the residual in one primitive, then the layer norm.

The weights are reordered once into oneDNN's blocked layout (``mkldnn._reorder_linear_weight``) -- what
inductor does for a frozen inference graph (``torch._inductor.config.freezing``) -- without a
compile: a checkpoint costs one reorder (milliseconds), where a frozen graph bakes the weights in and
is compiled again for every checkpoint. Speed against the eager forward, in one run:
``benchmarks/bench_fused_encoder.py``.

**Numerics.** The operations and their precision are eager bf16's; the rounding differs: a fused
primitive applies its bias, GELU or residual to the fp32 accumulator and rounds once to bf16, where
eager rounds after the GEMM and again after the element-wise kernel; the attention kernel
accumulates in fp32 and rounds its output once, as PyTorch's flash kernel does, with its own
exponential (about 1 ulp of float32). The scores therefore differ
from the eager bf16 path's by about bf16's error (``tests/test_fused_encoder.py``), and the
evaluation's near-tie rescoring (:mod:`rerank_scaling.evaluation.near_ties`) estimates its bound from
the scores it is given, so every rank metric stays fp32's.

**fp32.** With fp32 weights the same layers run as oneDNN fp32 primitives (PyTorch's SDPA and layer
norm; the compiled kernels are bf16-only): the GEMMs are oneDNN's instead of MKL's, and the bias,
GELU and residual are applied to the accumulator in the same pass. The scores differ from the eager
fp32 forward's by float32 rounding (a few 1e-6; ``tests/test_fused_encoder.py``), far below any
metric's noise (``benchmarks/results/fused_fp32_bar_zen2.md``: on a Zen 2 only CE@16 moved, by
1.5e-06 of its standard error). Whether that is faster depends on the CPU's GEMMs (on an AMD Zen 2,
MKL's fp32 GEMM is the slower of the two, on a Zen 3 the faster): it is used where the CPU kind's
measured profile says so (:attr:`rerank_scaling.compute.cpu_profiles.CpuProfile.fused_fp32`, from
``benchmarks/bench_fused_encoder.py --dtype fp32``), else the fp32 forward stays eager.

**Where it applies** (:func:`fused_forward`, else the caller keeps the eager forward):
:data:`FUSED_ENCODERS` holds one builder per transformers ``model_type``; the model must be a
sentence-transformers module stack whose first module writes the encoder's last hidden state to
``token_embeddings`` for text (the ``mean`` head; the ``cls`` head's sequence-classification model
stays eager), its weights bf16 on a CPU whose oneDNN has bf16 (or fp32, above), in inference mode.
ModernBERT, windowed attention (:mod:`rerank_scaling.training.sparse_encoder`) and GPUs keep their
eager (or compiled) forward.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackedLinear:
    """A linear layer's weight in oneDNN's blocked layout, and its bias."""

    weight: Any
    bias: Any

    @classmethod
    def of(cls, *linears: Any) -> PackedLinear:
        """One layer, or several stacked along their outputs (one GEMM for all)."""
        import torch

        weight = torch.cat([linear.weight.detach() for linear in linears])
        bias = torch.cat([linear.bias.detach() for linear in linears])
        return cls(torch.ops.mkldnn._reorder_linear_weight(weight, None), bias)

    def __call__(self, x: Any, activation: str = "none") -> Any:
        """x W' + b, then ``activation`` (``none`` or ``gelu``, erf) in the same primitive."""
        import torch

        algorithm = "none" if activation == "gelu" else ""
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, activation, [], algorithm)

    def plus(self, x: Any, residual: Any) -> Any:
        """x W' + b + ``residual`` in one primitive."""
        import torch

        return torch.ops.mkldnn._linear_pointwise.binary(x, residual, self.weight, self.bias, "add")


@dataclass(frozen=True)
class EncoderKernels:
    """The extension's two kernels for this encoder (``kernels/window_attention/packed_attention.h``)."""

    attention: Callable[..., Any]  # packed_attention(qkv, keep, scale)
    layer_norm: Callable[..., Any]  # row_layer_norm(x, weight, bias, eps)


@dataclass(frozen=True)
class RowNorm:
    """A layer norm of (rows, width) bf16: the compiled row kernel with fp32 copies of the weights
    where given and the width is one it covers (:data:`ROW_NORM_WIDTH`), else PyTorch's."""

    norm: Any  # nn.LayerNorm
    weight: Any  # fp32, for the kernel
    bias: Any
    kernel: Callable[..., Any] | None

    @classmethod
    def of(cls, norm: Any, kernel: Callable[..., Any] | None) -> RowNorm:
        fp32 = (norm.weight.detach().float().contiguous(), norm.bias.detach().float().contiguous())
        return cls(norm, *fp32, kernel)

    def __call__(self, x: Any) -> Any:
        import torch.nn.functional as F

        width = x.shape[-1]
        if self.kernel is not None and width % 16 == 0 and width <= ROW_NORM_WIDTH:
            return self.kernel(x, self.weight, self.bias, self.norm.eps)
        norm = self.norm
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


@dataclass(frozen=True)
class FusedBertLayer:
    """One BERT encoder layer's weights, packed (module docstring)."""

    qkv: PackedLinear
    attention_out: PackedLinear
    attention_norm: RowNorm
    intermediate: PackedLinear
    out: PackedLinear
    out_norm: RowNorm
    heads: int

    @classmethod
    def of(cls, layer: Any, layer_norm: Callable[..., Any] | None = None) -> FusedBertLayer:
        attention = layer.attention
        own = attention.self
        return cls(
            PackedLinear.of(own.query, own.key, own.value),
            PackedLinear.of(attention.output.dense),
            RowNorm.of(attention.output.LayerNorm, layer_norm),
            PackedLinear.of(layer.intermediate.dense),
            PackedLinear.of(layer.output.dense),
            RowNorm.of(layer.output.LayerNorm, layer_norm),
            own.num_attention_heads,
        )

    def __call__(self, hidden: Any, attention: Callable[[Any], Any]) -> Any:
        """The layer's output for ``hidden`` (batch, length, width); ``attention``: the packed query,
        key and value rows (batch, length, 3, heads, head width) -> the attended rows in the same
        (batch, length, heads, head width) layout (:meth:`FusedBert.attention`)."""
        batch, length, width = hidden.shape
        x = hidden.reshape(batch * length, width)
        qkv = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads)
        context = attention(qkv).reshape(batch * length, width)
        attended = self.attention_norm(self.attention_out.plus(context, x))
        inner = self.intermediate(attended, "gelu")
        return self.out_norm(self.out.plus(inner, attended)).view(batch, length, width)


@dataclass(frozen=True)
class FusedBert:
    """A ``BertModel``'s last hidden state with its layers fused (module docstring)."""

    embeddings: Any  # the model's BertEmbeddings, eager
    layers: tuple[FusedBertLayer, ...]
    attention_kernel: Callable[..., Any] | None  # packed_attention, or None: SDPA

    @classmethod
    def of(cls, bert: Any, kernels: EncoderKernels | None = None) -> FusedBert | None:
        """The fused encoder (with the compiled ``kernels`` where given), or None where ``bert``'s
        config asks for what it does not do."""
        config = bert.config
        unsupported = (
            config.hidden_act != "gelu"
            or getattr(config, "position_embedding_type", "absolute") != "absolute"
            or getattr(config, "is_decoder", False)
            or config.hidden_size % config.num_attention_heads
        )
        if unsupported:
            return None
        norm = kernels.layer_norm if kernels else None
        layers = tuple(FusedBertLayer.of(layer, norm) for layer in bert.encoder.layer)
        return cls(bert.embeddings, layers, kernels.attention if kernels else None)

    def attention(self, keep: Any, head_width: int, dtype: Any) -> Callable[[Any], Any]:
        """Every layer's attention for one batch, padding mask ``keep`` (batch, length): the packed
        kernel where it covers the shape (:data:`PACKED_LENGTH`, :data:`PACKED_HEAD_WIDTHS`), else SDPA
        with the additive mask in ``dtype``; either way softmax(q k^T / sqrt(head width) + mask) v."""
        import torch
        import torch.nn.functional as F

        kernel = self.attention_kernel
        if kernel is not None and keep.shape[1] <= PACKED_LENGTH and head_width in PACKED_HEAD_WIDTHS:
            keep = keep.bool().contiguous()
            scale = head_width**-0.5
            return lambda qkv: kernel(qkv, keep, scale)
        mask = (1.0 - keep[:, None, None, :].to(dtype)) * torch.finfo(dtype).min

        def sdpa(qkv: Any) -> Any:
            query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            return F.scaled_dot_product_attention(query, key, value, attn_mask=mask).transpose(1, 2)

        return sdpa

    def __call__(self, features: dict[str, Any]) -> Any:
        ids = features["input_ids"]
        hidden = self.embeddings(input_ids=ids, token_type_ids=features.get("token_type_ids"))
        width = hidden.shape[-1] // self.layers[0].heads
        attention = self.attention(features["attention_mask"], width, hidden.dtype)
        for layer in self.layers:
            hidden = layer(hidden, attention)
        return hidden


#: The longest sequence and the head widths the packed attention kernel is compiled for
#: (``kPackedMaxLength`` and the template instances of ``cpu/packed_attention_cpu.cpp``), and the
#: widest row of its layer norm (``kRowNormMaxWidth``; a multiple of 16).
PACKED_LENGTH = 128
PACKED_HEAD_WIDTHS = (32, 64)
ROW_NORM_WIDTH = 2048


def encoder_kernels() -> EncoderKernels | None:
    """The extension's ``packed_attention`` and ``row_layer_norm`` where it is built on this machine
    (:func:`rerank_scaling.compute.extension_build.built_kernels`: a scoring job loads a build, it
    never compiles a first one), else None: the encoder runs PyTorch's SDPA and layer norm."""
    from rerank_scaling.compute.extension_build import built_kernels

    ops = built_kernels()
    attention, layer_norm = (getattr(ops, name, None) for name in ("packed_attention", "row_layer_norm"))
    return EncoderKernels(attention, layer_norm) if attention and layer_norm else None


@functools.cache
def announce(dtype: str, kind: str, layers: int, attention: str) -> None:
    """Say, once per process, precision and architecture, that the fused encoder scores, and how it
    attends."""
    log.info(
        "%s scoring by the fused oneDNN encoder (%s, %d layers; attention and layer norms: %s)",
        dtype,
        kind,
        layers,
        attention,
    )


#: transformers ``model_type`` -> the builder of its fused encoder from the model and the attention
#: kernel or None (the builder returns None for an unsupported config).
FUSED_ENCODERS: dict[str, Callable[[Any, Any], Any]] = {"bert": FusedBert.of}


def fused_forward(
    model: Any, device: str, kernels: bool = True, fp32: bool | None = None
) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """``model``'s forward (features -> features with ``scores``) through its fused encoder, or None
    where it does not apply (module docstring: the caller keeps the eager forward); ``kernels``: a bf16
    encoder's attention and layer norms by the compiled kernels where built (else, or with False,
    PyTorch's); ``fp32``: whether fp32 weights are fused too (None: where this CPU kind's profile
    says it pays, :attr:`~rerank_scaling.compute.cpu_profiles.CpuProfile.fused_fp32`). Run it in
    inference mode, under the contexts the eager forward would run under (the fp32 score layer)."""
    import torch

    from rerank_scaling.compute.cpu_profiles import cpu_profile

    modules = list(model.children()) if isinstance(model, torch.nn.Sequential) else []
    first = modules[0] if modules else None
    hf = getattr(first, "model", None)
    modalities = getattr(first, "modality_config", None) or {}
    text = modalities["text"] if "text" in modalities else {}  # how the module runs text
    applies = (
        device == "cpu"
        and hf is not None
        and getattr(first, "module_output_name", None) == "token_embeddings"
        and text.get("method") == "forward"
        and text.get("method_output_name") == "last_hidden_state"
        and getattr(hf.config, "model_type", None) in FUSED_ENCODERS
        and getattr(hf.config, "_attn_implementation", "sdpa") in ("sdpa", "eager")  # not windowed
    )
    dtypes = {p.dtype for p in hf.encoder.parameters()} if applies else set()
    low = dtypes == {torch.bfloat16} and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    precise = dtypes == {torch.float32} and (cpu_profile().fused_fp32 if fp32 is None else fp32)
    applies = applies and (low or precise) and torch.backends.mkldnn.is_available()
    compiled = encoder_kernels() if applies and low and kernels else None
    encoder = FUSED_ENCODERS[hf.config.model_type](hf, compiled) if applies else None
    if encoder is None:
        return None
    how = "compiled kernels" if compiled else "SDPA and PyTorch's layer norm"
    announce("bf16" if low else "fp32", hf.config.model_type, len(encoder.layers), how)

    def forward(features: dict[str, Any]) -> dict[str, Any]:
        features = {**features, "token_embeddings": encoder(features)}
        for module in modules[1:]:
            features = module(features)
        return features

    return forward
