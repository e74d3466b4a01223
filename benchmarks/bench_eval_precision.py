"""bfloat16 vs fp32 evaluation on a run's own final checkpoints: the change in every final metric
and the scoring time, measured in one run (fp32 and bf16 interleaved per checkpoint).

    python benchmarks/bench_eval_precision.py results/default --split dev \
        --out benchmarks/results/eval_precision_cpu.md

The evaluation stage may score in bf16 (``evaluation.precision: bf16``) only if no final nDCG@10
moves by more than ``--tolerance`` (0.002, the bar of issue 16); the report says whether it holds.
The machine's 1-minute load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml
from benchmark_output import emit

from rerank_scaling.evaluation.checkpoints import EvalSettings, evaluate_checkpoints, load_split
from rerank_scaling.settings import settings_from_dict


def final_checkpoints(results: Path) -> list[Path]:
    """The last ckpt-XX directory of every trained run under ``results/checkpoints``."""
    finals = []
    for run in sorted((results / "checkpoints").iterdir()):
        ckpts = sorted(run.glob("ckpt-*/checkpoint.json"))
        if ckpts:
            finals.append(ckpts[-1].parent)
    return finals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, help="a finished run's results directory")
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--split", default="dev")
    parser.add_argument("--metric", default="nDCG@10")
    parser.add_argument("--tolerance", type=float, default=0.002)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(args.config.read_text())
    base = settings_from_dict(EvalSettings, config["evaluation"], "evaluation")
    max_length = config["training"]["max_length"]
    split = load_split(
        str(args.results / "data" / "collection"),
        str(args.results / "bm25" / "runs" / f"{args.split}.trec"),
        args.split,
        base.rerank_depth,
        (base.max_queries or {}).get(args.split),
        base.seed,
    )
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for ckpt in final_checkpoints(args.results):
            values, seconds = {}, {}
            for precision in ("fp32", "bf16"):
                settings = replace(base, precision=precision, final_only_splits=())
                start = time.perf_counter()
                table, _ = evaluate_checkpoints(
                    [ckpt], [split], settings, max_length, "cpu", Path(work) / "runs", Path(work) / precision
                )
                seconds[precision] = time.perf_counter() - start
                values[precision] = table.set_index("metric")["value"]
            delta = (values["bf16"] - values["fp32"]).abs()
            rows.append(
                {
                    "run": ckpt.parent.name,
                    "fp32": values["fp32"][args.metric],
                    "bf16": values["bf16"][args.metric],
                    "delta": delta[args.metric],
                    "max_delta_any_metric": delta[~delta.index.str.endswith("_dropped")].max(),
                    "fp32_s": seconds["fp32"],
                    "bf16_s": seconds["bf16"],
                }
            )
    load_after = os.getloadavg()[0]
    worst = max(r["delta"] for r in rows)
    speedups = [r["fp32_s"] / r["bf16_s"] for r in rows]
    lines = [
        f"# Evaluation in bfloat16 vs fp32 ({args.results}, {args.split}, final checkpoints)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {args.threads} thread(s); load average {load_before:.2f} before, "
        f"{load_after:.2f} after. {len(split.queries)} queries x depth {base.rerank_depth}.",
        "",
        f"- largest |bf16 - fp32| of final {args.metric}: **{worst:.4f}** "
        f"({'within' if worst <= args.tolerance else 'ABOVE'} the tolerance {args.tolerance})",
        f"- scoring time fp32 / bf16 (checkpoint load, scoring, metrics): median "
        f"**{statistics.median(speedups):.2f}x**, range {min(speedups):.2f}-{max(speedups):.2f}x "
        f"over {len(rows)} checkpoints",
        "",
        f"| run | {args.metric} fp32 | bf16 | abs. difference | max over metrics | fp32 s | bf16 s |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['run']} | {r['fp32']:.4f} | {r['bf16']:.4f} | {r['delta']:.4f} | "
            f"{r['max_delta_any_metric']:.4f} | {r['fp32_s']:.2f} | {r['bf16_s']:.2f} |"
            for r in rows
        ),
    ]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
