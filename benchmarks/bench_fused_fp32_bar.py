"""The statistical bar for the fused oneDNN encoder's fp32 scoring (or for the evaluation's batch
size), on a run's own final checkpoints.

    python benchmarks/bench_fused_fp32_bar.py results/default --splits dev test --runs L1__listwise \
        L2__listwise L3__listwise L4__listwise L6__listwise --out benchmarks/results/fused_fp32_bar_zen2.md
    python benchmarks/bench_fused_fp32_bar.py results/default --splits dev test --batch-sizes 64 16 \
        --out benchmarks/results/eval_batch_bar_zen3.md

Where a CPU kind's profile turns on :attr:`rerank_scaling.compute.cpu_profiles.CpuProfile.fused_fp32`,
the evaluation's fp32 scores come from oneDNN's fp32 primitives instead of the eager forward
(:mod:`rerank_scaling.compute.fused_encoder`): the same arithmetic, other rounding. Each final
checkpoint of ``results`` (or those of ``--runs``) is evaluated both ways by the evaluation itself
(``bench_eval_precision.score``: checkpoint load, scoring, metrics), the two in alternating order
per checkpoint, which also times them. The bar (as ``bench_eval_precision.py``'s): for every run,
split and final metric, |fused - eager| < ``--quarter`` (0.25) x the metric's standard error over
queries; the table also gives the largest |fused - eager| of a pair's score, and how many queries
changed value at all. The CPU and the load average before and after are in the header.

With ``--batch-sizes A B`` the two sides are instead the evaluation's ``batch_size`` A and B, both on
the CPU kind's own fp32 path (a batch is padded to its longest pair, so the batch size changes the
GEMMs' shapes and with them the rounding, not the arithmetic), and the speed-up is A's time over B's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pandas as pd
import torch
import transformers
import yaml
from bench_eval_precision import compare, final_checkpoints, run_splits, score
from benchmark_output import commit, emit

from rerank_scaling.compute import cpu_profiles
from rerank_scaling.compute.cpu_profiles import cpu_kind
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.precision import cpu_name
from rerank_scaling.settings import settings_from_dict

PATHS = {"eager": False, "fused": True}  # label -> CpuProfile.fused_fp32


def sides(
    profile: cpu_profiles.CpuProfile, base: EvalSettings, batch_sizes: list[int] | None
) -> dict[str, tuple[cpu_profiles.CpuProfile, EvalSettings]]:
    """The two ways each checkpoint is evaluated, label -> (the CPU profile in force, the settings):
    eager and fused fp32 scoring, or ``batch_sizes``' two batch sizes on the kind's own path."""
    if batch_sizes:
        return {f"batch {b}": (profile, replace(base, batch_size=b)) for b in batch_sizes}
    return {label: (dataclasses.replace(profile, fused_fp32=on), base) for label, on in PATHS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, help="a finished run's results directory")
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--splits", nargs="+", default=["dev"])
    parser.add_argument("--quarter", type=float, default=0.25, help="the bar, in standard errors")
    parser.add_argument("--runs", nargs="+", default=None, help="only the runs whose names start so")
    parser.add_argument("--batch-sizes", nargs=2, type=int, default=None, help="compare these instead")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    config = yaml.safe_load(args.config.read_text())
    base = settings_from_dict(EvalSettings, config["evaluation"], "evaluation")
    base = replace(base, final_only_splits=(), precision="fp32", compile="off")
    torch.set_num_threads(base.threads)
    max_length = config["training"]["max_length"]
    splits = run_splits(args.results, base, args.splits)
    finals = final_checkpoints(args.results, args.runs)
    profile = cpu_profiles.cpu_profile()
    ways = sides(profile, base, args.batch_sizes)
    first, second = ways
    load_before, start = os.getloadavg()[0], time.perf_counter()
    tables, seconds, largest = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        # untimed: the process's first evaluation pays its warm-up (imports, allocator, kernels),
        # which had made the first path timed 2x slower than the second on the first checkpoint
        score(next(iter(finals.values())), splits, base, max_length, "warm-up", Path(tmp))
        for index, (run, ckpt) in enumerate(finals.items()):
            order = list(ways) if index % 2 == 0 else list(reversed(ways))
            timing, scores = {}, {}
            for path in order:
                forced, settings = ways[path]
                with mock.patch.object(cpu_profiles, "cpu_profile", lambda kind=None, p=forced: p):
                    rows, timing[path], scores[path] = score(
                        ckpt, splits, settings, max_length, f"{run}|{path}", Path(tmp)
                    )
                tables.append(rows)
            seconds[run] = timing
            largest[run] = max(
                float((scores[second][s.name] - scores[first][s.name]).abs().max()) for s in splits
            )
    elapsed, load_after = time.perf_counter() - start, os.getloadavg()[0]
    per_query = pd.concat(tables, ignore_index=True).assign(checkpoint=0)
    bar = compare(per_query, [(r, f"{r}|{first}", f"{r}|{second}") for r in finals], args.splits)
    bar["ratio"] = bar["difference"].abs() / bar["se"]
    speedups = {run: t[first] / t[second] for run, t in seconds.items()}
    worst = bar.loc[bar["ratio"].idxmax()]
    option = f" --batch-sizes {' '.join(map(str, args.batch_sizes))}" if args.batch_sizes else ""
    what = (
        f"{second.capitalize()} against {first}" if args.batch_sizes else "The fused encoder's fp32 scoring"
    )
    lines = [
        f"# {what} against the statistical bar ({args.results}, final checkpoints)",
        "",
        f"`python benchmarks/bench_fused_fp32_bar.py{option}` at commit {commit()} on **{cpu_name()}** (kind "
        f"`{cpu_kind()}`; its profile's `fused_fp32`: {profile.fused_fp32}), {base.threads} thread(s), "
        f"torch {torch.__version__}; load average {load_before:.2f} before, {load_after:.2f} after; run "
        f"time {elapsed / 60:.1f} min. Splits: {', '.join(args.splits)}; BM25 top {base.rerank_depth} "
        "reranked; standard errors: bootstrap over queries (1000 resamples).",
        "",
        f"- bar: |{second} - {first}| < {args.quarter} x the metric's standard error over queries, for every "
        f"run, split and final metric ({len(bar)} values): "
        f"**{'met' if (bar['ratio'] < args.quarter).all() else 'NOT met'}**; worst ratio "
        f"{worst['ratio']:.3g} ({worst['run']}, {worst['split']}, {worst['metric']}); values that "
        f"changed at all: {int((bar['difference'].abs() > 0).sum())}; queries whose value changed: "
        f"{int(bar['changed'].sum())} (over all runs, splits and metrics)",
        f"- largest |{second} - {first}| of a pair's score: {max(largest.values()):.2g}",
        f"- evaluation time {first} / {second} (checkpoint load, scoring, metrics): median "
        f"**{statistics.median(speedups.values()):.2f}x**, range {min(speedups.values()):.2f}-"
        f"{max(speedups.values()):.2f}x over {len(speedups)} checkpoints",
        "",
        f"| run | {first} s | {second} s | speed-up | largest score difference | largest metric ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run, timing in seconds.items():
        ratio = bar.loc[bar["run"] == run, "ratio"].max()
        lines.append(
            f"| {run} | {timing[first]:.1f} | {timing[second]:.1f} | {speedups[run]:.2f}x | "
            f"{largest[run]:.2g} | {ratio:.3g} |"
        )
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
