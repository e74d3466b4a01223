"""Compiled graphs against today's eager path, and both against the same run's bf16 matmul peak.

    python benchmarks/bench_compile.py --threads 1 --out benchmarks/results/compile_amx.md

In one process: the bf16 matmul peak (``bench_cpu_peak.matmul_peak``), then per default size
(config.yaml's models) an evaluation forward (``evaluation.batch_size`` pairs, the weights cast to
bf16 once: what the evaluation runs on a CPU with bf16 units) and a pointwise training step
(``training.pointwise_batch_size`` pairs, bf16 autocast, fused AdamW: the trainer's step), each eager
(before) and compiled (after: :func:`rerank_scaling.compute.compiled_graphs.compiled_forward` for the forward,
:func:`~rerank_scaling.compute.compiled_graphs.compile_in_place` of the encoder for the step), the four
interleaved in every repeat so a load change hits them alike. The table gives the median seconds
and their spread (min-max), the FLOP/s of the median and its share of the peak, the speed-up (ratio
of medians), and the compile's seconds (the first compiled call, with inductor's cache as found:
``TORCHINDUCTOR_CACHE_DIR``, else ``results/.cache/inductor``). Break-even: the compile's seconds
over what it saves a pair (evaluation) or a step (training), the work from which
``compile: auto`` compiles (:mod:`rerank_scaling.compute.cpu_profiles`). FLOPs, the CPU's name and the load
average as in ``bench_cpu_peak.py``.

``--precision`` (default: what ``precision: auto`` resolves to on this CPU): on a CPU without bf16
units the trainer steps in fp32, so there the training step is timed in fp32 (eager and compiled, the
same fused AdamW) against the same run's fp32 matmul peak; the evaluation's fp32 scoring has no
compiled path (``evaluation.compile`` compiles the bf16 scoring) and is left out.
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
from bench_cpu_peak import Steps, matmul_peak
from benchmark_output import emit

from rerank_scaling.compute.compiled_graphs import compile_in_place, compiled_forward, use_cache_dir
from rerank_scaling.compute.cpu_profiles import cpu_kind, eval_batch_size
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.precision import cpu_name, fp32_score_layer, resolve_precision

#: precision -> the trainer's step eagerly and compiled (bench_cpu_peak.Steps's training modes)
TRAIN_MODES = {"bf16": ("bf16 autocast", "bf16 autocast, compiled"), "fp32": ("fp32", "fp32, compiled")}
#: precision -> what is timed (the evaluation's fp32 scoring is not compiled in the pipeline)
KINDS = {
    "bf16": ("eval eager", "eval compiled", "train eager", "train compiled"),
    "fp32": ("train eager", "train compiled"),
}


def compiled_eval(steps: Steps) -> Callable[[], Any]:
    """The evaluation forward through the process's compiled graph of the bf16 model."""
    shell, forward = compiled_forward(steps.bf16)
    features = dict(steps.eval_features)  # the model adds its outputs to the dict it is given

    def run() -> Any:
        with torch.inference_mode(), fp32_score_layer(shell, "cpu"):
            return forward(dict(features))["scores"].float()

    return run


def add_compiled_step(steps: Steps, label: str) -> None:
    """A trained model whose encoder is compiled in place, with the trainer's fused AdamW, as the
    training mode ``label``."""
    trained = build_cross_encoder(steps.spec, steps.max_length, 0).train()
    trained.model.get_input_embeddings().weight.requires_grad_(False)
    compile_in_place(trained[0])  # the encoder module (its Hugging Face model's caller)
    params = [p for p in trained.parameters() if p.requires_grad]
    steps.train_models[label] = trained
    steps.optimizers[label] = torch.optim.AdamW(params, lr=1e-5, fused=True)


def first_call_seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(spec: dict[str, Any], config: dict[str, Any], repeats: int, precision: str) -> dict[str, Any]:
    """Median, min and max seconds of each of :data:`KINDS` of ``precision``, interleaved, and the
    compile seconds."""
    max_length = config["training"]["max_length"]
    steps = Steps(
        spec,
        max_length,
        eval_batch_size(config["evaluation"]["batch_size"], "cpu"),
        config["training"]["pointwise_batch_size"],
    )
    eager_train, compiled_train = TRAIN_MODES[precision]
    add_compiled_step(steps, compiled_train)
    kinds = KINDS[precision]
    makers = {  # each kind's timed callable, made only for the kinds this precision times
        "eval eager": lambda: steps.evaluate("bf16 weights"),
        "eval compiled": lambda: compiled_eval(steps),
        "train eager": lambda: steps.train(eager_train),
        "train compiled": lambda: steps.train(compiled_train),
    }
    calls = {kind: makers[kind]() for kind in kinds}
    for kind in kinds:  # the eager ones first: their features dicts reach their final keys
        if kind.endswith("eager"):
            calls[kind]()
    compile_s = {kind: first_call_seconds(calls[kind]) for kind in kinds if kind.endswith("compiled")}
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(repeats):
        for kind in kinds:
            times[kind].append(first_call_seconds(calls[kind]))
    return {
        "model": spec["name"],
        "times": times,
        "compile": compile_s,
        "flops": {"eval": steps.eval_flops(), "train": steps.train_flops()},
        "pairs": {"eval": steps.eval_batch, "train": 1},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--models", nargs="+", default=None, help="only these sizes (default: all)")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    precision = resolve_precision(args.precision, "cpu")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    kinds = KINDS[precision]
    parts = sorted({kind.split()[0] for kind in kinds}, key=("eval", "train").index)
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    cache = use_cache_dir()
    config = yaml.safe_load(args.config.read_text())
    load_before, start = os.getloadavg()[0], time.perf_counter()
    peaks = [matmul_peak(dtype, 3)[0]]
    rows = []
    for spec in config["models"]:
        if args.models is None or spec["name"] in args.models:
            rows.append(measure(spec, config, args.repeats, precision))
            peaks.append(matmul_peak(dtype, 3)[0])  # the peak between sizes too: the load drifts
    peak = statistics.median(peaks)
    load_after, elapsed = os.getloadavg()[0], time.perf_counter() - start
    g = 1e9

    def cell(row: dict[str, Any], kind: str) -> str:
        values = row["times"][kind]
        median = statistics.median(values)
        rate = row["flops"][kind.split()[0]] / median
        spread = f"{min(values) * 1e3:.1f}-{max(values) * 1e3:.1f}"
        return f"{median * 1e3:.1f} ({spread}) | {rate / g:.0f} ({100 * rate / peak:.0f}%)"

    lines = [
        f"# Compiled graphs against the eager path ({args.threads} thread(s))",
        "",
        f"CPU: **{cpu_name()}** (kind `{cpu_kind()}`); torch {torch.__version__}; {args.threads} thread(s) "
        f"of {os.cpu_count()} CPUs; load average {load_before:.2f} before, {load_after:.2f} after (a shared "
        f"machine: compare the ratios, measured interleaved); run time {elapsed / 60:.1f} min; "
        f"{args.repeats} interleaved repeats; inductor cache `{cache}`.",
        "",
        f"{precision} matmul peak, this run: **{peak / g:.0f} GFLOP/s** (median of {len(peaks)} "
        f"measurements between sizes, {min(peaks) / g:.0f}-{max(peaks) / g:.0f}).",
        "",
        (
            f"Evaluation: a forward of {config['evaluation']['batch_size']} pairs, bf16 weights; training: "
            f"a pointwise step of {config['training']['pointwise_batch_size']} pairs, bf16 autocast, "
            "fused AdamW; "
            if precision == "bf16"
            else f"Training: a pointwise step of {config['training']['pointwise_batch_size']} pairs in fp32 "
            "(no bf16 units: `precision: auto` trains in fp32), fused AdamW; the fp32 evaluation has no "
            "compiled path; "
        )
        + f"{config['training']['max_length']} tokens. Cells: median ms (min-max) | GFLOP/s of the median "
        "(% of the peak).",
        "",
        "| model | " + " | ".join(f"{kind} ms | {kind} GFLOP/s" for kind in kinds) + " |",
        "|---|" + "---:|" * (2 * len(kinds)),
        *(f"| {row['model']} | " + " | ".join(cell(row, kind) for kind in kinds) + " |" for row in rows),
        "",
        "Speed-up (ratio of medians) and the compile's cost:",
        "",
        "| model | "
        + " | ".join(
            f"{part} speed-up | {part} compile s | {part} break-even {'pairs' if part == 'eval' else 'steps'}"
            for part in parts
        )
        + " |",
        "|---|" + "---:|" * (3 * len(parts)),
    ]
    for row in rows:
        cells = []
        for kind in parts:
            eager = statistics.median(row["times"][f"{kind} eager"])
            compiled = statistics.median(row["times"][f"{kind} compiled"])
            saved = (eager - compiled) / row["pairs"][kind]
            compile_s = row["compile"][f"{kind} compiled"]
            even = f"{compile_s / saved:.0f}" if saved > 0 else "never"
            cells += [f"{eager / compiled:.2f}x", f"{compile_s:.1f}", even]
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
