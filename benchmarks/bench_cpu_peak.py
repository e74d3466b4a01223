"""How close evaluation and training come to the CPU's own bf16 (and fp32) matmul peak, in one run.

    python benchmarks/bench_cpu_peak.py --threads 1 --out benchmarks/results/cpu_peak.md

Measured in the same process, interleaved: (1) the matmul peak in fp32 and bf16 on the threads
used (the best of several GEMM shapes, one of them the issue's 2048x384 @ 384x1536); (2) for each
default ladder size (config.yaml's models), the FLOP/s of an evaluation forward (batch of
``evaluation.batch_size`` pairs) and of a pointwise training step (``training.pointwise_batch_size``
pairs, BCE, gradient clipping at 1.0, AdamW, frozen word embeddings: the Trainer's step), at
``training.max_length`` tokens. Evaluation in fp32, bf16 autocast and bf16 weights cast once (what
:func:`rerank_scaling.evaluation.rerank.score_pairs` runs on a CPU: ``precision.to_bf16_weights``),
the score layer in fp32 in both bf16 modes. Training in fp32 and bf16 autocast with fused AdamW
(what the trainer runs: ``optim="adamw_torch_fused"``), bf16 autocast with the for-loop AdamW
(torch's default on a CPU), and bf16 weights and gradients with an fp32 master copy that AdamW
updates. (3) The GEMM ceiling: the largest size's linear layers alone, as bf16 GEMMs of the same
shapes (evaluation: the forward's; training: forward and both backward GEMMs), which bounds what
the element-wise rest could be cut to. (4) A torch.profiler breakdown of the largest size's bf16
evaluation forward and training step by kind of operator (GEMMs, attention, casts, optimizer, the
rest), and the time to tokenize a batch, which is what limits them where they fall short of the
peak. FLOPs are the planner's analytic counts (``planning.encoder_flops.EncoderShape``: 2 N per
token + attention; training 3x), the same that ``plan.md`` divides by its measured times. The CPU
is named from ``/proc/cpuinfo`` with the bf16 units :mod:`rerank_scaling.precision` detects; the
1-minute load average is recorded before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
import yaml
from benchmark_output import emit

from rerank_scaling.compute.cpu_profiles import eval_batch_size
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.planning.encoder_flops import EncoderShape
from rerank_scaling.precision import cpu_name, fp32_score_layer, to_bf16_weights
from rerank_scaling.settings import model_spec

GEMMS = ((2048, 384, 1536), (2048, 1536, 384), (1024, 1024, 1024), (2048, 2048, 2048))
#: Timed modes; the evaluation's bf16 path on a CPU and the trainer's are marked in the tables.
MODES = {
    "eval": ("fp32", "bf16 autocast", "bf16 weights"),
    "train": ("fp32", "bf16 autocast", "bf16 autocast, for-loop AdamW", "bf16 weights"),
}
#: The modes the pipeline runs on a CPU with bf16 units (evaluation.precision / training.precision auto).
PIPELINE = {"eval": "bf16 weights", "train": "bf16 autocast"}
#: The Trainer's default gradient clipping (``max_grad_norm``).
MAX_GRAD_NORM = 1.0


def best_seconds(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> float:
    """The fastest of ``repeats`` timed calls after ``warmup`` untimed ones (the least disturbed
    by other processes on a shared machine)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_peak(dtype: torch.dtype, repeats: int) -> tuple[float, tuple[int, int, int]]:
    """The best FLOP/s of ``a @ b`` over :data:`GEMMS` in ``dtype``, and the shape that gave it."""
    best = (0.0, GEMMS[0])
    for m, k, n in GEMMS:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        rate = 2.0 * m * k * n / best_seconds(lambda a=a, b=b: a @ b, repeats)
        best = max(best, (rate, (m, k, n)))
    return best


def features_of(model: Any, batch: int, max_length: int) -> dict[str, torch.Tensor]:
    """A batch of full-length synthetic (query, passage) pairs, tokenized by the model's tokenizer."""
    query = " ".join(["relevance"] * 12)
    document = " ".join(["passage"] * (2 * max_length))
    features = model.preprocess([(query, document)] * batch)
    return {k: v for k, v in features.items() if hasattr(v, "to")}


class Steps:
    """The timed callables of one model size: an evaluation forward and a training step per mode."""

    def __init__(self, spec: dict[str, Any], max_length: int, eval_batch: int, train_batch: int) -> None:
        self.spec, self.max_length = spec, max_length
        self.eval_batch, self.train_batch = eval_batch, train_batch
        model = build_cross_encoder(spec, max_length, 0)
        self.shape = EncoderShape.from_hf_config(model.model.config, model_spec(spec)["head"])
        self.eval_features = features_of(model, eval_batch, max_length)
        self.train_features = features_of(model, train_batch, max_length)
        self.seq_len = int(self.eval_features["input_ids"].shape[1])
        self.labels = torch.tensor([float(i % 2) for i in range(train_batch)])
        self.fp32 = model.eval()
        self.bf16 = to_bf16_weights(build_cross_encoder(spec, max_length, 0)).eval()
        self.train_models: dict[str, Any] = {}
        self.optimizers: dict[str, Any] = {}
        self.masters: dict[str, list[tuple[torch.nn.Parameter, torch.nn.Parameter]]] = {}
        for mode in MODES["train"]:
            trained = build_cross_encoder(spec, max_length, 0).train()
            trained.model.get_input_embeddings().weight.requires_grad_(False)
            params = [p for p in trained.parameters() if p.requires_grad]
            fused = {"foreach": False} if "for-loop" in mode else {"fused": True}
            if mode == "bf16 weights":
                master = [torch.nn.Parameter(p.detach().clone()) for p in params]
                to_bf16_weights(trained)  # the score layer stays fp32, as in evaluation
                params = [p for p in trained.parameters() if p.requires_grad]
                self.masters[mode] = list(zip(params, master, strict=True))
                self.optimizers[mode] = torch.optim.AdamW(master, lr=1e-5, **fused)
            else:
                self.optimizers[mode] = torch.optim.AdamW(params, lr=1e-5, **fused)
            self.train_models[mode] = trained

    def eval_flops(self) -> float:
        return self.eval_batch * self.shape.forward_flops(self.seq_len)

    def train_flops(self) -> float:
        return self.train_batch * self.shape.train_flops(self.seq_len)

    def evaluate(self, mode: str) -> Callable[[], Any]:
        model = self.bf16 if mode == "bf16 weights" else self.fp32

        def run() -> Any:
            with (
                torch.inference_mode(),
                torch.autocast("cpu", torch.bfloat16, enabled=mode == "bf16 autocast"),
                fp32_score_layer(model, "cpu"),
            ):
                return model(self.eval_features)["scores"].float()

        return run

    def train(self, mode: str) -> Callable[[], None]:
        model, optimizer = self.train_models[mode], self.optimizers[mode]
        pairs = self.masters.get(mode, [])
        params = [p for p in model.parameters() if p.requires_grad]

        def step() -> None:
            with (
                torch.autocast("cpu", torch.bfloat16, enabled=mode.startswith("bf16 autocast")),
                fp32_score_layer(model, "cpu"),
            ):
                scores = model(self.train_features)["scores"].view(-1).float()
            torch.nn.functional.binary_cross_entropy_with_logits(scores, self.labels).backward()
            torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
            for low, master in pairs:  # bf16 gradients into the fp32 master copy, and back
                master.grad = None if low.grad is None else low.grad.float()
                low.grad = None
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                for low, master in pairs:
                    low.copy_(master)

        return step

    def gemm_shapes(self, rows: int, training: bool) -> list[tuple[int, int, int]]:
        """(m, k, n) of every linear layer's GEMM for ``rows`` tokens: the forward's, and with
        ``training`` the two backward ones (input gradient, weight gradient)."""
        shapes = []
        for layer in self.fp32.modules():
            if isinstance(layer, torch.nn.Linear) and layer.out_features > 1:  # the score layer is tiny
                k, n = layer.in_features, layer.out_features
                shapes.append((rows, k, n))
                if training:
                    shapes += [(rows, n, k), (k, rows, n)]
        return shapes


def gemm_ceiling(shapes: list[tuple[int, int, int]], repeats: int) -> float:
    """FLOP/s of ``shapes`` as bf16 GEMMs run back to back (best of ``repeats``): what a step whose
    element-wise rest took no time would reach."""
    bf16 = torch.bfloat16
    operands = [(torch.randn(m, k, dtype=bf16), torch.randn(k, n, dtype=bf16)) for m, k, n in shapes]

    def run() -> None:
        for a, b in operands:
            a @ b

    return sum(2.0 * m * k * n for m, k, n in shapes) / best_seconds(run, repeats)


def operator_kind(name: str) -> str:
    """The group a profiled operator belongs to, for 'what limits it'."""
    groups = (
        ("GEMMs (linear layers)", ("addmm", "aten::mm", "bmm", "aten::linear", "matmul", "mkldnn")),
        ("attention (SDPA, softmax)", ("attention", "softmax")),
        ("casts and copies", ("_to_copy", "aten::to", "aten::copy_", "clone")),
        ("dropout", ("dropout", "bernoulli")),
        ("layer norm", ("layer_norm",)),
        ("GELU", ("gelu",)),
        ("optimizer (AdamW)", ("optimizer", "adam", "foreach", "lerp", "addcdiv", "sqrt")),
    )
    return next(
        (kind for kind, keys in groups if any(k in name.lower() for k in keys)), "other (adds, masks, loss)"
    )


def profile_shares(fn: Callable[[], Any]) -> dict[str, float]:
    """Share of self CPU time per :func:`operator_kind` over five calls of ``fn``."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            fn()
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        kind = operator_kind(event.key)
        totals[kind] = totals.get(kind, 0.0) + event.self_cpu_time_total
    whole = sum(totals.values()) or 1.0
    return {kind: value / whole for kind, value in sorted(totals.items(), key=lambda kv: -kv[1])}


def tokenize_seconds(steps: Steps, batch: int, repeats: int) -> float:
    """Seconds to tokenize ``batch`` full-length pairs (what the training collator does per step)."""
    model = steps.fp32
    query = " ".join(["relevance"] * 12)
    document = " ".join(["passage"] * (2 * steps.max_length))
    return best_seconds(lambda: model.preprocess([(query, document)] * batch), repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--threads", type=int, default=1, help="threads per job (the default's jobs use 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    config = yaml.safe_load(args.config.read_text())
    max_length = config["training"]["max_length"]
    eval_batch = eval_batch_size(config["evaluation"]["batch_size"], "cpu")
    train_batch = config["training"]["pointwise_batch_size"]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()

    peaks = {
        name: matmul_peak(dtype, args.repeats)
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    rows = []
    largest = None
    for spec in config["models"]:
        steps = Steps(spec, max_length, eval_batch, train_batch)
        row: dict[str, Any] = {"model": spec["name"], "seq_len": steps.seq_len}
        for repeat in range(args.repeats):  # modes interleaved, so load changes hit them alike
            for kind in ("eval", "train"):
                for mode in MODES[kind]:
                    fn = steps.evaluate(mode) if kind == "eval" else steps.train(mode)
                    seconds = best_seconds(fn, 1, warmup=2 if repeat == 0 else 0)
                    key = (kind, mode)
                    row[key] = min(row.get(key, float("inf")), seconds)
        for kind, flops in (("eval", steps.eval_flops()), ("train", steps.train_flops())):
            for mode in MODES[kind]:
                row[(kind, mode, "flops")] = flops / row[(kind, mode)]
        rows.append(row)
        largest = steps
    assert largest is not None
    shares = {
        f"evaluation forward, {PIPELINE['eval']}": profile_shares(largest.evaluate(PIPELINE["eval"])),
        f"training step, {PIPELINE['train']}": profile_shares(largest.train(PIPELINE["train"])),
    }
    ceilings = {
        "eval": gemm_ceiling(largest.gemm_shapes(eval_batch * largest.seq_len, False), args.repeats),
        "train": gemm_ceiling(largest.gemm_shapes(train_batch * largest.seq_len, True), args.repeats),
    }
    tokenize = {
        "eval": tokenize_seconds(largest, eval_batch, args.repeats),
        "train": tokenize_seconds(largest, train_batch, args.repeats),
    }
    load_after = os.getloadavg()[0]
    elapsed = time.perf_counter() - start

    bf16_peak, fp32_peak = peaks["bf16"][0], peaks["fp32"][0]
    g = 1e9

    def pct(rate: float) -> str:
        return f"{rate / g:.0f} ({100 * rate / bf16_peak:.0f}%)"

    def header(kind: str, mode: str) -> str:
        return f"**{kind} {mode}**" if PIPELINE[kind] == mode else f"{kind} {mode}"

    columns = [(kind, mode) for kind in ("eval", "train") for mode in MODES[kind]]

    lines = [
        f"# Evaluation and training FLOP/s against the CPU's matmul peak ({args.threads} thread(s))",
        "",
        f"CPU: **{cpu_name()}**; torch {torch.__version__}, oneDNN {torch.backends.mkldnn.is_available()}, "
        f"{args.threads} thread(s) of {os.cpu_count()} CPUs; load average {load_before:.2f} before, "
        f"{load_after:.2f} after; run time {elapsed / 60:.1f} min. Best of {args.repeats} interleaved "
        "repeats.",
        "",
        "## Matmul peak on the threads used",
        "",
        "| precision | GFLOP/s | best shape (m, k, n) |",
        "|---|---:|---|",
        *(f"| {name} | {rate / g:.0f} | {shape} |" for name, (rate, shape) in peaks.items()),
        "",
        f"bf16 / fp32 peak: **{bf16_peak / fp32_peak:.1f}x**.",
        "",
        f"## Per default size: GFLOP/s (and % of the bf16 peak), {max_length} tokens",
        "",
        f"Evaluation: a forward of {eval_batch} pairs; training: a pointwise step of {train_batch} pairs "
        f"(forward, backward, gradient clipping, AdamW). **Bold**: what the pipeline runs on a CPU with "
        "bf16 units (evaluation: the weights cast to bf16 once, `precision.to_bf16_weights`; training: "
        "autocast with the Trainer's fused AdamW). bf16 weights in training: bf16 weights and gradients, "
        "an fp32 master copy that AdamW updates.",
        "",
        "| model | " + " | ".join(header(kind, mode) for kind, mode in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for row in rows:
        cells = [pct(row[(kind, mode, "flops")]) for kind, mode in columns]
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Seconds per call (best):",
        "",
        "| model | " + " | ".join(header(kind, mode) for kind, mode in columns) + " |",
        "|---|" + "---:|" * len(columns),
        *(
            f"| {row['model']} | " + " | ".join(f"{row[(kind, mode)]:.4f}" for kind, mode in columns) + " |"
            for row in rows
        ),
        "",
        "Speed-ups (median over sizes): "
        + "; ".join(
            f"{kind} {mode} over {base} "
            f"{statistics.median(row[(kind, base)] / row[(kind, mode)] for row in rows):.2f}x"
            for kind, mode, base in (
                ("eval", "bf16 autocast", "fp32"),
                ("eval", "bf16 weights", "fp32"),
                ("eval", "bf16 weights", "bf16 autocast"),
                ("train", "bf16 autocast", "fp32"),
                ("train", "bf16 autocast", "bf16 autocast, for-loop AdamW"),
                ("train", "bf16 weights", "bf16 autocast"),
            )
        )
        + ".",
        "",
        f"## The GEMM ceiling of {largest.spec['name']}",
        "",
        "Its linear layers' GEMMs alone, in bf16, back to back (no attention, no element-wise work): "
        f"evaluation ({eval_batch * largest.seq_len} token rows, the forward's GEMMs) "
        f"**{ceilings['eval'] / g:.0f} GFLOP/s ({100 * ceilings['eval'] / bf16_peak:.0f}% of the peak)**; "
        f"training ({train_batch * largest.seq_len} token rows, forward and both backward GEMMs) "
        f"**{ceilings['train'] / g:.0f} GFLOP/s ({100 * ceilings['train'] / bf16_peak:.0f}%)**. "
        "A step cannot beat its GEMMs: this is what it would reach if everything else took no time.",
        "",
        f"## What limits {largest.spec['name']} (torch.profiler, self CPU time by operator kind)",
        "",
        "| operator kind | " + " | ".join(shares) + " |",
        "|---|" + "---:|" * len(shares),
    ]
    kinds = sorted(
        {k for s in shares.values() for k in s}, key=lambda k: -max(s.get(k, 0.0) for s in shares.values())
    )
    lines += [
        f"| {kind} | " + " | ".join(f"{100 * s.get(kind, 0.0):.0f}%" for s in shares.values()) + " |"
        for kind in kinds
    ]
    last = rows[-1]
    eval_s, train_s = last[("eval", PIPELINE["eval"])], last[("train", PIPELINE["train"])]
    lines += [
        "",
        f"Tokenizing a batch ({largest.spec['name']}'s tokenizer): {eval_batch} pairs "
        f"{tokenize['eval'] * 1e3:.1f} ms "
        f"({100 * tokenize['eval'] / eval_s:.0f}% of its bf16 forward; evaluation "
        f"tokenizes each split once per run), {train_batch} pairs {tokenize['train'] * 1e3:.1f} ms "
        f"({100 * tokenize['train'] / train_s:.0f}% of its bf16 training step; the "
        "trainer tokenizes every batch, and the token counter once more).",
    ]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
