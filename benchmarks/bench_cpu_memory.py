"""Peak memory and time of the CPU jobs that grow with the data: the coefficients of
:mod:`rerank_scaling.workflow.cpu_memory`, and their check against measured peaks at 5% and 10% of the paper.

    python benchmarks/bench_cpu_memory.py --out benchmarks/results/cpu_memory.md

Runs the jobs' own commands (``python -m rerank_scaling.data.build_examples`` with config.paper.yaml's
``examples`` section; ``python -m rerank_scaling.evaluation.merge_metrics``) on synthetic
MS MARCO-shaped inputs (``benchmarks/msmarco_shaped.py``), each in a fresh process whose peak
resident set (``VmHWM`` at its end) and wall time are recorded. The coefficients are fitted
by non-negative least squares on the small calibration runs only (``training_examples`` at 0.5-2%
of the paper's data, with the settings and the corpus varied so that each term moves on its own;
``merge_metrics`` on small grids), then the model predicts the held-out runs: ``training_examples``
at 5% and 10% (442k and 884k passages, 10k and 20k train queries), ``merge_metrics`` on the paper
grid's 360 parts at 5% and 10% of MS MARCO's evaluation queries and on 36 and 108 parts at the full
queries. A prediction further than ``--tolerance`` (25%) from the measured peak fails the run.

On each ``training_examples`` collection the other CPU jobs that grow with the data run too, each
its own command: ``annotation_examples`` (on the examples just written), ``prepare_corpus`` and
``prepare_qrels`` (``prepare_data --part``, a local source), ``split_texts`` and ``evaluate_bm25``
(the train split's run standing in for an evaluated split's), fitted on the calibration collections
and checked on the 5% and 10% ones in the same way. Every job's model is a :class:`LinearCost` in
the counts :data:`COST_TERMS` names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msmarco_shaped
import numpy as np
import yaml
from benchmark_output import emit
from scipy.optimize import nnls

from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.evaluation.metrics import metric_names
from rerank_scaling.precision import cpu_name
from rerank_scaling.settings import settings_of, without
from rerank_scaling.workflow.cpu_memory import (
    CorpusCounts,
    ExamplesCounts,
    ExampleTableCounts,
    LinearCost,
    MergeCounts,
    RunLinesCounts,
    SplitTextsCounts,
    expected_distinct,
)

REPO = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((REPO / "config.paper.yaml").read_text())
RUN_DEPTH = PAPER["retrieval"]["depth"]

#: training_examples runs: (name, query scale, passage scale, examples keys changed); fitted or checked.
EXAMPLE_CALIBRATION = (
    ("0.5%", 0.005, 0.005, {}),
    ("1%", 0.01, 0.01, {}),
    ("2%", 0.02, 0.02, {}),
    ("1%, negative_depth 30", 0.01, 0.01, {"negative_depth": 30}),
    ("1%, negatives 20 / 40", 0.01, 0.01, {"pointwise_negatives": 20, "group_negatives": 40}),
    ("1% queries, 4% passages", 0.01, 0.04, {}),
)
EXAMPLE_CHECKS = (("5%", 0.05, 0.05, {}), ("10%", 0.10, 0.10, {}))
#: merge_metrics runs: (name, query scale, runs, checkpoints).
MERGE_CALIBRATION = (
    ("1% queries, 6 parts", 0.01, 3, 2),
    ("25% queries, 6 parts", 0.25, 3, 2),
    ("60% queries, 12 parts", 0.6, 3, 4),
)
MERGE_CHECKS = (
    ("5% queries, 360 parts", 0.05, 18, 20),
    ("10% queries, 360 parts", 0.10, 18, 20),
    ("full queries, 36 parts", 1.0, 3, 12),
    ("full queries, 108 parts", 1.0, 9, 12),
)


#: Runs a module as ``python -m`` would, then prints the process's peak resident set (VmHWM: the
#: high-water mark of its own memory since exec; a child's ru_maxrss also counts the parent's
#: resident set at the fork, which here holds the synthetic data).
PEAK_RUNNER = """
import runpy, sys
module, sys.argv = sys.argv[1], sys.argv[1:]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit as stop:
    if stop.code not in (None, 0):
        raise
status = open("/proc/self/status").read()
print("VmHWM", int(status.split("VmHWM:")[1].split()[0]), file=sys.stderr)
"""


def measured(module: str, arguments: list[str]) -> tuple[float, float]:
    """Peak resident set (MB) and wall seconds of ``python -m module arguments`` in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RUNNER, module, *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{module} failed: {done.stderr.decode()[-2000:]}")
    kilobytes = int(done.stderr.decode().rsplit("VmHWM ", 1)[1].split()[0])
    return kilobytes * 1024 / 1e6, seconds


def examples_run(work: Path, query_scale: float, passage_scale: float, changed: dict) -> dict:
    root = work / "collection"
    shutil.rmtree(root, ignore_errors=True)
    counts = msmarco_shaped.write_collection(root, query_scale, RUN_DEPTH, passage_scale=passage_scale)
    settings = {**PAPER["examples"], **changed}
    peak, seconds = measured(
        "rerank_scaling.data.build_examples",
        ["--collection", str(root)]
        + ["--split", "train", "--run", str(root / "train.trec"), "--settings", json.dumps(settings)]
        + ["--pointwise", str(work / "pointwise.parquet"), "--groups", str(work / "groups.parquet")],
    )
    shape = ExamplesCounts.of(
        counts["passages"],
        counts["queries"],
        counts["positives"],
        RUN_DEPTH,
        settings["negative_depth"],
        settings["pointwise_negatives"],
        settings["group_negatives"],
    )
    rows = {"training_examples": {"counts": shape, "peak_mb": peak, "seconds": seconds}}
    return {**rows, **collection_jobs(work, root, counts, shape)}


#: The evaluation section the BM25 evaluation job gets (rules/common.smk's evaluation_json(model_free)).
BM25_EVALUATION = without(
    {**PAPER["evaluation"], "max_queries": None},
    EvalSettings.JOB_KEYS,
    EvalSettings.SCORING_KEYS,
    EvalSettings.RESOURCE_KEYS,
)


def collection_jobs(work: Path, root: Path, counts: dict, shape: ExamplesCounts) -> dict[str, dict]:
    """The other data-sized CPU jobs on one synthetic collection (module docstring), by rule."""
    local = json.dumps({"name": "synthetic", "source": "local", "local": {"path": str(root)}})
    rerank_depth = min(int(PAPER["evaluation"]["rerank_depth"]), RUN_DEPTH)
    jobs = {
        "annotation_examples": (
            "rerank_scaling.data.annotation_examples",
            ["--source", "ict", "--seed", "0", "--pointwise", str(work / "pointwise.parquet")]
            + ["--groups", str(work / "groups.parquet"), "--out", str(work / "ict")],
            ExampleTableCounts(shape.example_documents),
        ),
        "prepare_corpus": (
            "rerank_scaling.data.prepare_data",
            ["--dataset", local, "--out", str(work / "copy"), "--part", "corpus"],
            CorpusCounts(counts["passages"]),
        ),
        "prepare_qrels": (  # against the corpus prepare_corpus materialised, as in the workflow
            "rerank_scaling.data.prepare_data",
            ["--dataset", local, "--out", str(work / "copy"), "--part", "qrels", "--split", "train"],
            CorpusCounts(counts["passages"]),
        ),
        "split_texts": (
            "rerank_scaling.evaluation.split_texts",
            ["--corpus", str(root / "corpus.jsonl"), "--run", str(root / "train.trec")]
            + ["--depth", str(rerank_depth), "--out", str(work / "texts.parquet")],
            SplitTextsCounts(
                counts["run_lines"],
                expected_distinct(counts["passages"], counts["queries"] * rerank_depth),
                counts["passages"],
            ),
        ),
        "evaluate_bm25": (
            "rerank_scaling.evaluation.evaluate",
            ["bm25", "--collection", str(root), "--bm25-dir", str(work / "bm25"), "--splits", "train"]
            + ["--settings", json.dumps(BM25_EVALUATION), "--out", str(work / "bm25.parquet")]
            + ["--per-query", str(work / "bm25.per_query.parquet")],
            RunLinesCounts(counts["run_lines"]),
        ),
    }
    (work / "bm25").mkdir(exist_ok=True)
    shutil.copyfile(root / "train.trec", work / "bm25" / "train.trec")
    rows = {}
    for rule, (module, arguments, job_counts) in jobs.items():
        peak, seconds = measured(module, arguments)
        rows[rule] = {"counts": job_counts, "peak_mb": peak, "seconds": seconds}
    shutil.rmtree(work / "copy", ignore_errors=True)
    return rows


#: What each rule's LinearCost model's memory and time are linear in (attributes of its counts).
COST_TERMS = {
    "training_examples": (
        ("queries", "pool_entries", "texts", "example_documents"),
        ("run_lines", "passages"),
    ),
    "merge_metrics": (("held_rows",), ("total_rows",)),
    "annotation_examples": (("example_documents",), ("example_documents",)),
    "prepare_corpus": (("passages",), ("passages",)),
    "prepare_qrels": (("passages",), ("passages",)),
    "split_texts": (("run_lines", "texts"), ("run_lines", "passages")),
    "evaluate_bm25": (("run_lines",), ("run_lines",)),
}


def linear_cost(rule: str, rows: list[dict]) -> LinearCost:
    """A :class:`LinearCost` fitted (non-negative least squares) on ``rows`` of one rule."""
    memory_terms, time_terms = COST_TERMS[rule]
    memory = fit(rows, lambda c: [1, *(getattr(c, t) / 1e6 for t in memory_terms)], "peak_mb")
    time_fit = fit(rows, lambda c: [1, *(getattr(c, t) for t in time_terms)], "seconds")
    return LinearCost(
        base_mb=float(f"{memory[0]:.4g}"),
        bytes_per={t: float(f"{v:.4g}") for t, v in zip(memory_terms, memory[1:], strict=True)},
        start_seconds=float(f"{time_fit[0]:.4g}"),
        seconds_per={t: float(f"{v:.4g}") for t, v in zip(time_terms, time_fit[1:], strict=True)},
    )


def merge_run(work: Path, query_scale: float, runs: int, checkpoints: int, metrics: int) -> dict:
    root = work / "eval"
    shutil.rmtree(root, ignore_errors=True)
    per_query = msmarco_shaped.write_parts(root, query_scale, runs, checkpoints, metrics)
    tables = [str(path.with_name(path.name.replace(".per_query", ""))) for path in per_query]
    peak, seconds = measured(
        "rerank_scaling.evaluation.merge_metrics",
        ["--inputs", *tables]
        + ["--out", str(work / "all.parquet"), "--csv", str(work / "all.csv"), "--per-query-inputs"]
        + [*map(str, per_query), "--per-query-out", str(work / "per_query.parquet")],
    )
    rows = sum(round(n * query_scale) or 1 for n in msmarco_shaped.EVAL_QUERIES.values()) * metrics
    counts = MergeCounts(
        largest_file_rows=rows, largest_run_rows=2 * rows, total_rows=rows * runs * checkpoints
    )
    return {"counts": counts, "peak_mb": peak, "seconds": seconds}


def fit(rows: list[dict], features, target: str) -> np.ndarray:
    """Non-negative least squares of ``target`` on ``features(counts)`` (a leading 1 for the base)."""
    design = np.array([features(row["counts"]) for row in rows], dtype=float)
    scale = design.max(axis=0)
    solution, _ = nnls(design / scale, np.array([row[target] for row in rows]))
    return solution / scale


def table(title: str, rows: list[tuple[str, str, dict]], model, tolerance: float) -> tuple[str, bool]:
    lines = [
        f"### {title}",
        "",
        "| run | role | measured peak MB | model MB | measured / model | wall s | model s |",
        "|---|---|---|---|---|---|---|",
    ]
    ok = True
    for name, role, row in rows:
        predicted, ratio = model.peak_mb(row["counts"]), row["peak_mb"] / model.peak_mb(row["counts"])
        within = abs(ratio - 1) <= tolerance
        ok &= within or role == "fitted"
        mark = "" if role == "fitted" else (" ok" if within else " **off**")
        lines.append(
            f"| {name} | {role} | {row['peak_mb']:.0f} | {predicted:.0f} | {ratio:.2f}{mark} "
            f"| {row['seconds']:.1f} | {model.seconds(row['counts']):.1f} |"
        )
    return "\n".join(lines) + "\n", ok


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("--tolerance", type=float, default=0.25)
    parser.add_argument("--quick", action="store_true", help="checks at 1/10 the scales (a smoke run)")
    args = parser.parse_args()
    shrink = 0.1 if args.quick else 1.0
    metrics = len(metric_names(settings_of(MetricSettings, PAPER["evaluation"])))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-cpu-memory-") as tmp:
        work = Path(tmp)
        fitted_collections = [
            (n, "fitted", examples_run(work, q, p, c)) for n, q, p, c in EXAMPLE_CALIBRATION
        ]
        checked_collections = [
            (n, "held out", examples_run(work, q * shrink, p * shrink, c)) for n, q, p, c in EXAMPLE_CHECKS
        ]
        fitted_merge = [(n, "fitted", merge_run(work, q, r, k, metrics)) for n, q, r, k in MERGE_CALIBRATION]
        checked_merge = [
            (n, "held out", merge_run(work, q * shrink, r, k, metrics)) for n, q, r, k in MERGE_CHECKS
        ]

    def of_rule(rule: str, runs: list) -> list:
        return [(name, role, rows[rule]) for name, role, rows in runs]

    runs = {  # rule -> (fitted, held out): merge_metrics on its grids, the others on the collections
        rule: (fitted_merge, checked_merge)
        if rule == "merge_metrics"
        else (of_rule(rule, fitted_collections), of_rule(rule, checked_collections))
        for rule in COST_TERMS
    }
    costs, cost_texts, costs_ok = {}, [], True
    for rule, (fitted, checked) in runs.items():
        costs[rule] = linear_cost(rule, [row for _, _, row in fitted])
        rule_text, rule_ok = table(rule, fitted + checked, costs[rule], args.tolerance)
        cost_texts.append(rule_text)
        costs_ok &= rule_ok
    coefficients = {
        "examples": dataclasses.asdict(costs.pop("training_examples")),
        "merge": dataclasses.asdict(costs.pop("merge_metrics")),
        "costs": {rule: dataclasses.asdict(cost) for rule, cost in costs.items()},
    }
    text = (
        "# CPU jobs' memory and time (benchmarks/bench_cpu_memory.py)\n\n"
        "Generated by `python benchmarks/bench_cpu_memory.py --out benchmarks/results/cpu_memory.md`.\n"
        f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs, {platform.machine()}); 1-minute load "
        f"average {load:.1f} before, {os.getloadavg()[0]:.1f} after. Held-out runs must be within "
        f"{args.tolerance:.0%} of the model fitted on the others"
        f"{' (quick run: checks at 1/10 the scales)' if args.quick else ''}.\n\n"
        + "\n".join(cost_texts)
        + "\n"
        "Coefficients (rerank_scaling.workflow.cpu_memory.EXAMPLES, MERGE and CPU_COSTS hold these):\n\n"
        f"```json\n{json.dumps(coefficients, indent=2)}\n```\n"
    )
    emit(text, args.out)
    if not costs_ok:
        raise SystemExit(f"a held-out prediction is more than {args.tolerance:.0%} off the measured peak")


if __name__ == "__main__":
    main()
