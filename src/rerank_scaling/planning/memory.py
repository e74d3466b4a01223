"""Peak training memory of a cross-encoder run, and the preflight that decides how to fit it.

The peak of one optimizer step (Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models", §4, count the same terms for a decoder) is

    peak = P (16 + 2 [half]) + T (L (a h + b i) + e h)                      (no checkpointing)
    peak = P (16 + 2 [half]) + T (L c h + (a' h + b' i) + e h)              (gradient checkpointing)

* P parameters (embeddings included): fp32 weights 4 B, gradients 4 B, AdamW's two moments 8 B;
  under half-precision autocast also its cached bf16/fp16 copy of every weight, 2 B;
* T tokens of the (micro-)batch, every sequence counted at ``training.max_length`` (batches pad to
  their longest pair, so this is the bound a batch of long pairs reaches: a retry of a run sized
  by it never meets a batch that is larger);
* L layers of width h and FFN width i: a, b bytes per token and layer that the backward pass keeps
  (:data:`ACTIVATIONS`); e h bytes per token outside the layers (embeddings, final norm, head);
* with checkpointing every layer keeps only its input (c h) and one layer at a time is recomputed
  with its full activations and their gradients (a' h + b' i).

The constants were measured on CPU (the slope of a fresh process's peak RSS in the batch's tokens,
``benchmarks/fit_activation_bytes.py``) for ModernBERT with SDPA attention, which stores no
s x s score matrix (FlashAttention and the memory-efficient CUDA kernel store none either);
``tests/planning/test_memory.py`` checks the formula against such measurements within 15%. On a GPU, the
CUDA context and the caching allocator's fragmentation come on top: :func:`usable_bytes` keeps
:data:`GPU_RESERVE_BYTES` and :data:`GPU_USABLE_SHARE` of the card for them.

The preflight (:func:`plan_memory`, config ``gpu_memory_gb`` and ``training.gradient_checkpointing``)
applies one rule, the same at parse time and in the training job:

1. the run fits as configured: train it so;
2. ``auto``: micro-batching (gradient accumulation with the same effective batch, no extra FLOPs)
   by the smallest k of at most :data:`AUTO_MAX_MICRO_BATCHES` that divides the batch and fits;
   else gradient checkpointing (one extra forward pass, ~ +33% FLOPs), with the smallest k that fits;
3. ``true``: checkpointing always, with the smallest k that fits; ``false``: never checkpointing,
   the smallest k that fits;
4. nothing fits (one row per micro-batch): refuse, with the numbers and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

GB = 1e9

#: Bytes per parameter of the training state: fp32 weights, gradients, AdamW's two moments.
STATE_BYTES_PER_PARAM = 16
#: Half-precision autocast caches a 2-byte copy of every weight during forward and backward.
AUTOCAST_CACHE_BYTES_PER_PARAM = 2

#: The CUDA context and kernels (outside torch's allocator) take about this much of the card.
GPU_RESERVE_BYTES = 1.5 * GB
#: Share of the rest torch's caching allocator can use without fragmentation failures.
GPU_USABLE_SHARE = 0.92

#: ``auto`` micro-batches before it turns to checkpointing: a quarter of the batch keeps a GPU busy.
AUTO_MAX_MICRO_BATCHES = 4

PRECISIONS = ("half", "fp32")


@dataclass(frozen=True)
class ActivationBytes:
    """Bytes per token the backward pass keeps (ModernBERT, SDPA; fitted, rounded up to 0.5)."""

    layer_h: float  # a: per layer, times the hidden width
    layer_i: float  # b: per layer, times the FFN width
    outside_h: float  # e: outside the layers (embeddings, final norm, head), times the width
    checkpoint_h: float  # c: per checkpointed layer: its input
    recompute_h: float  # a': the one layer recomputed in the backward pass, with its gradients
    recompute_i: float  # b'


#: Fitted to CPU peaks under bf16 autocast ("half", fp16 keeps the same) and fp32 by
#: benchmarks/fit_activation_bytes.py (its report: benchmarks/results/activation_bytes.md).
ACTIVATIONS = {
    "half": ActivationBytes(23.5, 8.5, 20.0, 4.0, 13.5, 11.0),
    "fp32": ActivationBytes(34.5, 19.0, 26.5, 4.0, 17.5, 25.0),
}


@dataclass(frozen=True)
class MemoryShape:
    """What training memory depends on: parameters, depth and widths."""

    params: int
    layers: int
    hidden: int
    intermediate: int

    @classmethod
    def from_hf_config(cls, config: dict[str, Any], layers: int | None = None) -> MemoryShape:
        """From a Hugging Face ``config.json`` (BERT-like or ModernBERT); ``layers`` overrides the depth
        (a ladder keeps the first layers). Parameters counted as the classes build them: embeddings,
        L (4 h^2 + m h i) with m = 3 for ModernBERT's gated FFN, norms and biases, the head."""
        h, i = int(config["hidden_size"]), int(config["intermediate_size"])
        depth = int(layers if layers is not None else config["num_hidden_layers"])
        vocab = int(config["vocab_size"])
        if config.get("model_type") == "modernbert":
            embeddings = vocab * h + h
            layer = 4 * h * h + 3 * h * i + 2 * h
            head = h * h + h + h + 1 + h - h  # head.dense, head.norm, classifier, final norm; layer 0 has
            # no attention norm
        else:
            positions = int(config.get("max_position_embeddings", 512)) + int(
                config.get("type_vocab_size", 2)
            )
            embeddings = (vocab + positions) * h + 2 * h
            layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
            head = h * h + h + h + 1  # pooler, classifier
        return cls(embeddings + depth * layer + head, depth, h, i)


# Ettin encoders (Weller et al. 2025, "Seq vs Seq"): hidden, layers, FFN width; ModernBERT vocabulary.
# Used when a model's config.json is not cached yet (before ./run.sh --prefetch).
ETTIN = {
    "jhu-clsp/ettin-encoder-17m": (256, 7, 384),
    "jhu-clsp/ettin-encoder-32m": (384, 10, 576),
    "jhu-clsp/ettin-encoder-68m": (512, 19, 768),
    "jhu-clsp/ettin-encoder-150m": (768, 22, 1152),
    "jhu-clsp/ettin-encoder-400m": (1024, 28, 2624),
    "jhu-clsp/ettin-encoder-1b": (1792, 28, 3840),
}
ETTIN_VOCAB = 50368


def ettin_config(path: str) -> dict[str, Any]:
    """A ``config.json``-like dict of an Ettin encoder from :data:`ETTIN`."""
    hidden, layers, ffn = ETTIN[path]
    return {
        "model_type": "modernbert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": ffn,
        "vocab_size": ETTIN_VOCAB,
    }


def model_config(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The ``config.json`` of a ``models[]`` entry without loading the model: what its family reads
    (:meth:`rerank_scaling.families.family.ModelFamily.config_json`: a local or cached hub directory,
    the scratch family's own shape), else the Ettin table; None when unknown (not prefetched)."""
    from rerank_scaling.families.registry import family_of

    config = family_of(spec).config_json(spec)
    if config is None and spec.get("path") in ETTIN:
        return ettin_config(spec["path"])
    return config


def model_shape(spec: dict[str, Any]) -> MemoryShape | None:
    """:class:`MemoryShape` of a ``models[]`` entry (None when its config is unknown), at the depth
    its family keeps (:meth:`~rerank_scaling.families.family.ModelFamily.layers_kept`)."""
    from rerank_scaling.families.registry import family_of

    config = model_config(spec)
    if config is None:
        return None
    return MemoryShape.from_hf_config(config, family_of(spec).layers_kept(spec))


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes of one training step and its two parts."""

    state: float
    activations: float

    @property
    def peak(self) -> float:
        return self.state + self.activations


def training_peak(
    shape: MemoryShape, sequences: int, max_length: int, precision: str, checkpointing: bool
) -> MemoryEstimate:
    """Peak bytes of a training step over ``sequences`` sequences of ``max_length`` tokens (module
    docstring's formula)."""
    if precision not in ACTIVATIONS:
        raise ValueError(f"precision {precision!r}: use one of {PRECISIONS}")
    per_param = STATE_BYTES_PER_PARAM + (AUTOCAST_CACHE_BYTES_PER_PARAM if precision == "half" else 0)
    act = ACTIVATIONS[precision]
    h, i, layers = shape.hidden, shape.intermediate, shape.layers
    if checkpointing:
        per_token = layers * act.checkpoint_h * h + act.recompute_h * h + act.recompute_i * i
    else:
        per_token = layers * (act.layer_h * h + act.layer_i * i)
    per_token += act.outside_h * h
    return MemoryEstimate(shape.params * per_param, sequences * max_length * per_token)


def usable_bytes(gpu_memory_gb: float) -> float:
    """What training may plan to use of a card of ``gpu_memory_gb`` GB (context and fragmentation off)."""
    return (gpu_memory_gb * GB - GPU_RESERVE_BYTES) * GPU_USABLE_SHARE


class MemoryRefused(ValueError):
    """No micro-batching or checkpointing fits the run on the configured GPU; the message says why."""


@dataclass(frozen=True)
class MemoryPlan:
    """How one run trains on the GPU: checkpointing, micro-batches of ``batch / micro_batches`` rows."""

    gradient_checkpointing: bool = False
    micro_batches: int = 1
    peak_gb: float | None = None  # planned peak (None: no GPU memory given, nothing checked)
    note: str = ""


def checkpointing_mode(value: str | bool) -> str:
    """``training.gradient_checkpointing`` as auto | true | false (YAML reads true/false as booleans)."""
    mode = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if mode not in ("auto", "true", "false"):
        raise ValueError(f"training.gradient_checkpointing: {value!r}; use auto, true or false")
    return mode


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def plan_memory(
    shape: MemoryShape,
    rows: int,
    sequences_per_row: int,
    max_length: int,
    precision: str,
    gpu_memory_gb: float,
    checkpointing: str | bool,
    what: str = "the run",
) -> MemoryPlan:
    """The module docstring's rule for a batch of ``rows`` rows (pointwise pairs, or groups of
    ``sequences_per_row`` documents: :func:`rerank_scaling.registries.objectives.rows_per_step`);
    :class:`MemoryRefused` when nothing fits."""
    budget = usable_bytes(gpu_memory_gb)
    checkpointing = checkpointing_mode(checkpointing)

    def peak(k: int, ckpt: bool) -> float:
        return training_peak(shape, rows // k * sequences_per_row, max_length, precision, ckpt).peak

    ks = _divisors(rows)
    if checkpointing == "true":
        order = [(k, True) for k in ks]
    elif checkpointing == "false":
        order = [(k, False) for k in ks]
    else:
        order = [(k, False) for k in ks if k <= AUTO_MAX_MICRO_BATCHES] + [(k, True) for k in ks]
    as_is = peak(1, checkpointing == "true")
    for k, ckpt in order:
        need = peak(k, ckpt)
        if need <= budget:
            note = ""
            if (k, ckpt) != (1, checkpointing == "true"):
                how = " with gradient checkpointing" if ckpt else ""
                how += (
                    f" in {k} micro-batches of {rows // k} rows (same effective batch {rows})"
                    if k > 1
                    else ""
                )
                note = (
                    f"{what}: {as_is / GB:.1f} GB as configured > {budget / GB:.1f} GB usable on a "
                    f"{gpu_memory_gb:g} GB GPU; training it{how}: peak {need / GB:.1f} GB"
                )
            return MemoryPlan(ckpt, k, round(need / GB, 2), note)
    smallest = min(peak(rows, ckpt) for ckpt in {ckpt for _, ckpt in order})
    state = training_peak(shape, 0, max_length, precision, False).state
    with_checkpointing = peak(rows, True)
    if checkpointing == "false" and with_checkpointing <= budget:
        fix = (
            "set training.gradient_checkpointing to auto or true (then one row per micro-batch needs "
            f"{with_checkpointing / GB:.1f} GB)"
        )
    else:
        card = smallest / GPU_USABLE_SHARE + GPU_RESERVE_BYTES
        fix = (
            f"train it on a GPU of at least {math.ceil(card / GB)} GB (and set gpu_memory_gb), or lower "
            "training.max_length"
        )
    raise MemoryRefused(
        f"{what} needs {as_is / GB:.1f} GB as configured and still {smallest / GB:.1f} GB with one row per "
        f"micro-batch (the weights, gradients and AdamW state alone take {state / GB:.1f} GB), more than "
        f"the {budget / GB:.1f} GB usable on a {gpu_memory_gb:g} GB GPU (gpu_memory_gb); {fix}"
    )
