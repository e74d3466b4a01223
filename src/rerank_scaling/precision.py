"""Which floating-point precision a job computes in: detected from the hardware, never guessed.

Config ``evaluation.precision`` and ``training.precision`` take ``auto``, ``fp32`` or ``bf16``;
:func:`resolve_precision` turns them into what runs (``fp32``, ``bf16`` or ``fp16``):

* CPU, ``auto``: ``bf16`` where the CPU has bfloat16 matrix units (Intel AMX-BF16, or the
  AVX512-BF16 dot-product instructions of Intel Cooper Lake/Sapphire Rapids and AMD Zen 4/5),
  which oneDNN uses for bfloat16 matmuls; else ``fp32`` (without them bf16 is emulated: slower
  than fp32, and less precise).
* CUDA, ``auto``: ``bf16`` where the GPU has native bf16 (Ampere and later), else ``fp16``
  (training then scales the loss: the Hugging Face Trainer's ``fp16`` GradScaler).
* ``fp32`` is always honoured; ``bf16`` is honoured even where emulated (with a warning).

The resolved precision is recorded per row of the metrics table (``records.METRIC_COLUMNS``'s
``precision``) and in the planning profiles, so every number says what it was computed in.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: What the config may ask for.
REQUESTS: tuple[str, ...] = ("auto", "fp32", "bf16")
#: What runs; the torch dtype of each low precision is :func:`autocast_dtype`.
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
#: CPU flags (``/proc/cpuinfo`` spelling) of native bfloat16 matmul units, best first.
CPU_BF16_FLAGS: tuple[str, ...] = ("amx_bf16", "avx512_bf16")


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty where there is none), read once per
    process (the fp32 scoring asks for the CPU kind's profile at every call)."""
    path = Path("/proc/cpuinfo")
    fields: dict[str, str] = {}
    if not path.exists():
        return fields
    for line in path.read_text().splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags: torch's cpuinfo (``torch.cpu.get_capabilities``) where it has it,
    else ``/proc/cpuinfo``'s ``flags`` line."""
    import torch

    capabilities = getattr(torch.cpu, "get_capabilities", None)
    if capabilities is not None:
        return frozenset(name for name, present in capabilities().items() if present is True)
    return frozenset(_cpuinfo().get("flags", "").split())


def cpu_bf16_units(flags: frozenset[str] | None = None) -> str | None:
    """The CPU's best native bfloat16 matmul unit (``amx_bf16`` or ``avx512_bf16``), or None."""
    flags = cpu_flags() if flags is None else flags
    return next((flag for flag in CPU_BF16_FLAGS if flag in flags), None)


def cpu_vendor() -> str:
    """The CPU's vendor (``/proc/cpuinfo``'s ``vendor_id``: GenuineIntel, AuthenticAMD), or ''."""
    return _cpuinfo().get("vendor_id", "")


def cpu_family() -> int | None:
    """The CPU's family number (``/proc/cpuinfo``'s ``cpu family``: AMD 23 is Zen 1/2, 25 Zen 3/4,
    26 Zen 5), or None where it is not given."""
    family = _cpuinfo().get("cpu family", "")
    return int(family) if family.isdigit() else None


def cpu_name() -> str:
    """The CPU's model name with its family/model numbers and bf16 unit, for benchmark tables
    (a virtual machine may report only "AMD EPYC"; family 25 is Zen 3/4, 26 is Zen 5)."""
    info = _cpuinfo()
    name = info.get("model name", "unknown CPU")
    family, model = info.get("cpu family"), info.get("model")
    ident = f", family {family} model {model}" if family and model else ""
    return f"{name}{ident}, bf16 units: {cpu_bf16_units() or 'none'}"


def native_bf16(device: str) -> bool:
    """Whether ``device`` computes bfloat16 matmuls natively (not emulated)."""
    import torch

    if device.startswith("cuda"):
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return cpu_bf16_units() is not None


def resolve_precision(requested: str, device: str, field: str = "precision") -> str:
    """``fp32``, ``bf16`` or ``fp16`` for a config request on ``device`` (see the module docstring)."""
    if requested not in REQUESTS:
        raise ValueError(f"{field}: unknown precision {requested!r}; use one of {', '.join(REQUESTS)}")
    if requested == "fp32":
        return "fp32"
    native = native_bf16(device)
    if requested == "bf16":
        if not native:
            log.warning("%s: bf16 on %s is emulated (no native bf16 units): slower than fp32", field, device)
        return "bf16"
    if native:
        return "bf16"
    return "fp16" if device.startswith("cuda") else "fp32"


def autocast_dtype(precision: str) -> Any:
    """The torch dtype autocast runs a resolved precision's matmuls in (None for ``fp32``)."""
    import torch

    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def score_layer(model: Any) -> Any:
    """The model's score layer: its last ``nn.Linear`` (the mean head's ``Dense``, a sequence
    classifier's ``classifier``)."""
    import torch

    return [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]


def casts_weights(precision: str, device: str) -> bool:
    """Whether inference at a resolved ``precision`` casts the weights to it once instead of
    autocasting every op: ``bf16`` on a CPU. There autocast re-casts every weight in every forward
    and round-trips activations through fp32; with AMX the GEMMs are so cheap that those casts
    cost more than the GEMMs' precision gains (``benchmarks/results/cpu_peak_amx.md``: bf16 weights
    against autocast, evaluation forward). fp16 keeps autocast (fp16 weights may overflow), and so
    does CUDA (not measured)."""
    return precision == "bf16" and not device.startswith("cuda")


def to_bf16_weights(model: Any) -> Any:
    """``model`` (in place) with bfloat16 weights and buffers for inference, except its score layer
    (:func:`score_layer`), which stays fp32; run it under :func:`fp32_score_layer` so its input is
    cast up and the logit is fp32. Idempotent: a second call changes nothing.

    Unlike autocast, layer norms, softmax and the mean pooling then run in bf16 too (with fp32
    accumulation inside the kernels); the effect on metrics is measured against the statistical bar,
    ``benchmarks/results/eval_precision_amx.md``."""
    import torch

    model.to(torch.bfloat16)
    score_layer(model).float()
    return model


@contextmanager
def fp32_score_layer(model: Any, device_type: str) -> Iterator[None]:
    """Run the model's score layer (:func:`score_layer`) in fp32, on an fp32 copy of its input: under
    autocast, and with bf16 weights (:func:`to_bf16_weights`).

    Under bf16 autocast a linear layer's output is bf16: 8 significant bits would quantize the
    relevance logits and tie near-equal candidates, swapping ranks that fp32 separates (measured:
    ``benchmarks/results/eval_precision_cpu.md``). The mean head's input comes out of a layer norm,
    which autocast runs in fp32, so its score is fp32 end to end, at the cost of one tiny matmul."""
    import torch

    linear = score_layer(model)
    original = linear.forward

    def forward(hidden: Any) -> Any:
        with torch.autocast(device_type=device_type, enabled=False):
            return original(hidden.float())

    linear.forward = forward
    try:
        yield
    finally:
        del linear.forward
