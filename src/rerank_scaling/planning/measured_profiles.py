"""Measured cost profiles of a reranker (the machine-cost simulation of Scaling Laws for Online Advertisement
Retrieval §3.3): for one model configuration a few timed training steps (binary cross-entropy, AdamW) and
inference batches on the configured device give seconds per example, achieved FLOP/s (analytic FLOPs of
:mod:`.encoder_flops` / time), peak memory, and the ``torch.utils.flop_counter`` count of one step
next to the analytic count (the FLOPs check). Profiles are cached as JSON, one file per (device
name, model spec, max_length, batch, torch version, CPU threads, precisions, code) under
``<cache>/<device>/``, written atomically. The code is :func:`profile_code`, the digest of what a
measurement runs (this module and every module it imports, the compiled kernels included): a
profile timed on other code (an edited fused encoder, a changed kernel) is measured again, one
timed before a comment or docstring edit is reused. :mod:`.cost_model` turns them into the price
of a model size.

``torch.utils.flop_counter`` sees the attention only in eager mode (in eval mode on CPU the fused
SDPA kernel is invisible to it), so the profiles count FLOPs with eager attention and
:func:`flop_check` compares that count with the dense-local analytic count (local layers as the
masked dense s x s product eager attention computes); the band-vs-dense gap is reported next to
it, per model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rerank_scaling.atomic import write_json
from rerank_scaling.families.registry import family_of
from rerank_scaling.planning.encoder_flops import EncoderShape
from rerank_scaling.planning.process_probes import peak_rss_reset, proc_status_mb, timed
from rerank_scaling.settings import model_spec
from rerank_scaling.stage_code import running_code_digest

log = logging.getLogger(__name__)

#: The stage entry whose code a measurement runs: the digest of it and its imports keys the cache.
PROFILED_CODE = "planning.measured_profiles"
FLOP_RATIO_RANGE = (0.9, 1.1)  # analytic / counted outside this range is flagged


def measured_flops(fn: Callable[[], Any], model: Any = None) -> int:
    """FLOPs of running ``fn`` once, counted by ``torch.utils.flop_counter.FlopCounterMode``.

    With ``model`` (a Hugging Face model), attention runs eagerly while counting, so that the
    counter sees the score and value products (it cannot see inside fused SDPA kernels).
    """
    from torch.utils.flop_counter import FlopCounterMode

    previous = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if previous is not None:
        model.set_attn_implementation("eager")
    try:
        with FlopCounterMode(display=False) as counter:
            fn()
    finally:
        if previous is not None:
            model.set_attn_implementation(previous)
    return int(counter.get_total_flops())


def flop_check(profile: CostProfile) -> str:
    """One line for plan.md: analytic / counted FLOPs of a profile, flagged outside
    :data:`FLOP_RATIO_RANGE`, with the local-attention gap explained where there is one.

    The counter runs with eager attention, which computes local layers as masked dense products,
    so it is compared with the dense-local analytic count; the planner's own count (local layers
    as bands) is lower by the printed factor, which is not an error.
    """
    shape = EncoderShape(**profile.shape)
    dense = profile.batch * shape.train_flops(profile.seq_len, dense_local=True)
    ratio = dense / max(profile.train_flops_measured, 1.0)
    low, high = FLOP_RATIO_RANGE
    verdict = "ok" if low <= ratio <= high else f"FLAGGED: outside [{low}, {high}]"
    line = (
        f"{profile.model}: analytic / counted training FLOPs {ratio:.3f} at s = {profile.seq_len} ({verdict})"
    )
    band = profile.train_flops_analytic / dense
    if band < 0.999:
        line += (
            f"; {shape.local_layers} of {shape.layers} layers attend locally (reach {shape.local_reach}):"
            f" the planner counts their band, {band:.3f} x the dense count the counter sees"
        )
    return line


@dataclass
class CostProfile:
    """Measured cost of one model configuration on one device (Scaling Laws for Online Advertisement Retrieval
    §3.3)."""

    key: str
    device: str  # device name, e.g. "NVIDIA H100 80GB HBM3" or "cpu: AMD EPYC (2 threads)"
    device_kind: str  # "cpu" | "cuda"
    model: str  # config name of the first model profiled with this spec
    spec: dict[str, Any]
    max_length: int
    batch: int
    steps: int
    seq_len: int  # tokens per profiled sequence (every sequence filled to max_length)
    params: int
    non_embedding_params: int
    shape: dict[str, Any]
    train_seconds_per_step: float  # the fastest timed step: on a shared machine, timings err upwards only
    infer_seconds_per_batch: float
    train_flops_analytic: float  # per step (batch sequences)
    train_flops_measured: float
    infer_flops_analytic: float  # per batch
    infer_flops_measured: float
    peak_memory_mb: float  # training: CUDA max allocated; CPU peak RSS growth (NaN if unknown)
    torch_version: str
    train_precision: str = "fp32"  # what the timed steps computed in (precision.resolve_precision)
    infer_precision: str = "fp32"
    infer_path: str = "eager"  # the forward the inference batches were timed on (compute.scoring_forward)
    created: float = field(default_factory=time.time)
    cached: bool = False  # set on load; not stored

    @property
    def train_seconds_per_example(self) -> float:
        return self.train_seconds_per_step / self.batch

    @property
    def infer_seconds_per_pair(self) -> float:
        return self.infer_seconds_per_batch / self.batch

    @property
    def train_flops_per_second(self) -> float:
        """Achieved training throughput: analytic FLOPs per step / seconds per step."""
        return self.train_flops_analytic / self.train_seconds_per_step

    @property
    def infer_flops_per_second(self) -> float:
        """Achieved inference throughput. (The analytic count, because in eval mode the CPU's fused
        attention kernel is invisible to ``FlopCounterMode``, which then counts ~3% low at s = 64.)"""
        return self.infer_flops_analytic / self.infer_seconds_per_batch

    def as_record(self) -> dict[str, Any]:
        """Flat dict (the stored fields plus the derived rates) for tables and profiles.json."""
        record = asdict(self)
        record.update(
            train_seconds_per_example=self.train_seconds_per_example,
            infer_seconds_per_pair=self.infer_seconds_per_pair,
            train_flops_per_second=self.train_flops_per_second,
            infer_flops_per_second=self.infer_flops_per_second,
        )
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> CostProfile:
        known = {f for f in cls.__dataclass_fields__ if f != "cached"}
        return cls(**{k: v for k, v in record.items() if k in known})


def device_name(device: str) -> str:
    """A stable name of the machine a profile is valid for (the cache is keyed by it)."""
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = found.group(1).strip() if found else model
    return f"cpu: {model} ({torch.get_num_threads()} threads)"


def profile_code() -> str:
    """The digest of the code a measurement runs (:data:`PROFILED_CODE` and its imports, as the
    running package holds them: :func:`~rerank_scaling.stage_code.running_code_digest`)."""
    return running_code_digest(PROFILED_CODE)


def profile_key(
    device: str,
    spec: dict[str, Any],
    max_length: int,
    batch: int,
    precisions: tuple[str, str] = ("fp32", "fp32"),
) -> str:
    """Cache key: device name, model spec (without its name and role), max_length, batch, torch,
    the (training, inference) precisions and :func:`profile_code`."""
    import torch

    shape_spec = {k: v for k, v in sorted(spec.items()) if k not in ("name", "role")}
    payload = {
        "device": device,
        "spec": shape_spec,
        "max_length": max_length,
        "batch": batch,
        "torch": torch.__version__,
        "code": profile_code(),
        "precisions": list(precisions),
    }
    return json.dumps(payload, sort_keys=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:80] or "device"


def cache_path(cache_dir: str | os.PathLike[str], device: str, key: str) -> Path:
    """``<cache>/<device slug>/<hash of the key>.json``: one file per profile, so writers never race."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return Path(cache_dir) / _slug(device) / f"{digest}.json"


@contextlib.contextmanager
def _corpus_inputs(spec: dict[str, Any]) -> Iterator[tuple[list[str] | None, str | None]]:
    """A synthetic corpus and a work directory for a family that trains on the corpus (scratch's
    tokenizer; cost only)."""
    if not family_of(spec).needs_corpus:
        yield None, None
        return
    words = [f"w{a}{b}" for a in "abcdefghij" for b in "klmnopqrst"]
    corpus = [" ".join(words[(i + j) % len(words)] for j in range(40)) for i in range(200)]
    with tempfile.TemporaryDirectory(prefix="profile-scratch-") as work:
        yield corpus, work


def measure_profile(
    spec: dict[str, Any],
    max_length: int,
    batch: int,
    steps: int,
    device: str,
    freeze_embeddings: bool = True,
    query_words: int = 12,
    seed: int = 0,
    precisions: tuple[str, str] = ("fp32", "fp32"),
) -> CostProfile:
    """Time ``steps`` training steps and inference batches of one model configuration (after a warm-up).

    Sequences are filled to ``max_length`` (long synthetic query/document pairs, truncated by the
    model's own tokenizer), so the profile is the cost of full-length pairs. Training: binary
    cross-entropy on the relevance logit, AdamW, word embeddings frozen as in training when
    ``freeze_embeddings``; in the resolved (training, inference) ``precisions``
    (:func:`rerank_scaling.precision.resolve_precision`) the way the stages run them: training under
    autocast; inference as :func:`rerank_scaling.evaluation.rerank.score_pairs` scores (bf16 weights
    cast once on a CPU, else autocast; the score layer in fp32), timed on the forward the evaluation
    runs (:func:`rerank_scaling.compute.scoring_forward.scoring_forward`: the fused oneDNN encoder where it
    applies; its FLOPs counted on the eager forward, which the counter sees), the path recorded as
    ``infer_path``. (The fp32 rescoring of bf16 near ties, a share of an evaluation's pairs, is not
    part of a pair's inference cost.)
    """
    import sentence_transformers.cross_encoder  # noqa: F401  (imported before the memory baseline)
    import torch

    from rerank_scaling.compute.scoring_forward import scoring_forward
    from rerank_scaling.families.models import build_cross_encoder, freeze_input_embeddings, model_stats
    from rerank_scaling.precision import autocast_dtype, casts_weights, fp32_score_layer, to_bf16_weights

    name = device_name(device)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    baseline_mb = peak_rss_reset() if device == "cpu" else 0.0
    with _corpus_inputs(spec) as (corpus, work):
        model = build_cross_encoder(spec, max_length, seed, corpus, work).to(device)
    if freeze_embeddings:
        freeze_input_embeddings(model)
    stats = model_stats(model.model)
    shape = EncoderShape.from_hf_config(model.model.config, model_spec(spec)["head"])
    query = " ".join(["relevance"] * query_words)
    document = " ".join(["passage"] * (2 * max_length))
    features = model.preprocess([(query, document)] * batch)
    features = {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}
    seq_len = int(features["input_ids"].shape[1])
    labels = torch.tensor([float(i % 2) for i in range(batch)], device=device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

    def autocast(precision: str) -> Any:
        dtype = autocast_dtype(precision)
        return torch.autocast(device, dtype=dtype) if dtype is not None else contextlib.nullcontext()

    def train_step() -> None:
        with autocast(precisions[0]):
            scores = model(features)["scores"].view(-1).float()
        torch.nn.functional.binary_cross_entropy_with_logits(scores, labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    weights_cast = casts_weights(precisions[1], device)

    def infer(forward: Callable[[dict[str, Any]], dict[str, Any]] = model) -> None:
        with (
            torch.inference_mode(),
            contextlib.nullcontext() if weights_cast else autocast(precisions[1]),
            fp32_score_layer(model, "cuda" if device.startswith("cuda") else "cpu"),
        ):
            forward(features)["scores"]

    model.train()
    hf_model = model.model  # eager attention while counting (the counter cannot see fused SDPA)
    train_counted = measured_flops(train_step, hf_model)  # also the warm-up (allocator, optimizer state)
    train_times = timed(train_step, steps, device)
    if device == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = proc_status_mb("VmHWM") - baseline_mb

    model.eval()
    if weights_cast:
        to_bf16_weights(model)
    infer_counted = measured_flops(infer, hf_model)  # eager: the counter cannot see the fused ops
    _, forward, infer_path = scoring_forward(model, device)
    infer(forward)  # the warm-up of the timed path
    infer_times = timed(lambda: infer(forward), steps, device)
    profile = CostProfile(
        key=profile_key(name, spec, max_length, batch, precisions),
        device=name,
        device_kind=device,
        model=spec["name"],
        spec=dict(spec),
        max_length=max_length,
        batch=batch,
        steps=steps,
        seq_len=seq_len,
        params=stats.params,
        non_embedding_params=stats.non_embedding_params,
        shape=asdict(shape),
        train_seconds_per_step=min(train_times),
        infer_seconds_per_batch=min(infer_times),
        train_flops_analytic=batch * shape.train_flops(seq_len),
        train_flops_measured=float(train_counted),
        infer_flops_analytic=batch * shape.forward_flops(seq_len),
        infer_flops_measured=float(infer_counted),
        peak_memory_mb=float(peak_mb),
        torch_version=torch.__version__,
        train_precision=precisions[0],
        infer_precision=precisions[1],
        infer_path=infer_path,
    )
    return profile


def cached_profile(
    spec: dict[str, Any],
    max_length: int,
    batch: int,
    steps: int,
    device: str,
    cache_dir: str | os.PathLike[str],
    freeze_embeddings: bool = True,
    measure: Callable[..., CostProfile] = measure_profile,
    precisions: tuple[str, str] = ("fp32", "fp32"),
) -> CostProfile:
    """The profile of a model configuration on ``device``: from the cache, else measured and cached.

    The returned profile's ``cached`` flag says which; ``measure`` is replaceable for tests.
    """
    name = device_name(device)
    key = profile_key(name, spec, max_length, batch, precisions)
    path = cache_path(cache_dir, name, key)
    if path.exists():
        with contextlib.suppress(ValueError, TypeError, KeyError):
            record = json.loads(path.read_text())
            if record.get("key") == key:
                profile = CostProfile.from_record(record)
                profile.cached = True
                profile.model = spec["name"]
                log.info("profile of %s on %s: cached (%s)", spec.get("name"), name, path)
                return profile
    start = time.perf_counter()
    profile = measure(spec, max_length, batch, steps, device, freeze_embeddings, precisions=precisions)
    record = profile.as_record()
    record.pop("cached")
    write_json(path, record)
    log.info(
        "profiled %s on %s in %.1f s: %.4f s/train example, %.5f s/pair, FLOPs analytic/counted %.3f",
        spec.get("name"),
        name,
        time.perf_counter() - start,
        profile.train_seconds_per_example,
        profile.infer_seconds_per_pair,
        profile.train_flops_analytic / max(profile.train_flops_measured, 1.0),
    )
    return profile
