"""The statistical bar for bfloat16, on a run's own final checkpoints, measured in one run.

    python benchmarks/bench_eval_precision.py results/default --bf16-trained results/exp-bf16 \
        --splits dev test --out benchmarks/results/eval_precision_cpu.md

(``eval_precision_cpu.md``: AMD EPYC, bf16 autocast; ``eval_precision_amx.md``: Intel Xeon with
AMX, the weights cast to bf16 once and the near ties rescored in fp32.)

1. **Scoring** (``evaluation.precision``): every final checkpoint of ``results`` is scored in fp32
   and in bf16 (the evaluation's own bf16 path: on a CPU the weights cast to bf16 once, the score
   layer in fp32, the near ties rescored in fp32, :func:`rerank_scaling.evaluation.rerank.score_pairs`
   and :mod:`rerank_scaling.evaluation.near_ties`), interleaved per checkpoint, which also times
   both. Per checkpoint and split the table gives the share of pairs scored in fp32 (calibration
   sample and near ties) and checks the rescoring's estimated error bound e on every pair: the
   largest |bf16 - fp32| of a scored pair (only pairs kept in bf16 have one) against e (at most 1:
   every order of candidates of different grades is fp32's) and against the calibration sample's
   largest (what the safety factor has to cover). The bar: for every
   run, split and final metric, |bf16 - fp32| < ``--quarter`` (0.25) x the metric's standard error
   over queries (the summary's yardstick: a bootstrap over queries,
   ``report.scaling_evidence.QueryTable``). A rank swap that the query sample cannot see is not a
   numerical problem; 0.002 in absolute terms (the bar set before this one) was an eighth of that error.
2. **Training** (``training.precision``), with ``--bf16-trained``: a run of the same config and
   seeds trained in bf16 (``benchmarks/configs/bf16_training.yaml``). Both runs' finals are scored
   in fp32 here, so only the training precision differs. The bar: each difference is within the
   noise between runs -- at most max(1.96 x its paired standard error over queries, the seed
   spread), the yardsticks of the summary's verdicts (``scaling_evidence.verdict`` says "no").
   The seed spread is the fp32 run's own: per objective, split and metric, the largest max - min
   over the seeds of a size trained with ``training.extra_seeds``.

The report states the worst ratio of each part, and the CPU (``precision.cpu_name``) and the load
average before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import transformers
import yaml
from benchmark_output import emit

from rerank_scaling.compute.cpu_profiles import cpu_kind, cpu_profile
from rerank_scaling.evaluation.checkpoints import SplitData, evaluate_checkpoints, load_split
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.evaluation.near_ties import CALIBRATION_PAIRS, NearTieReport
from rerank_scaling.precision import casts_weights, cpu_name
from rerank_scaling.report.scaling_evidence import QueryTable, final_rows, verdict
from rerank_scaling.settings import settings_from_dict

#: How the header names the compiled bf16 scoring.
COMPILED = " by the compiled graph (evaluation.compile on)"
#: ... and otherwise (the fused encoder scores where it applies, else the eager forward).
FUSED = " by the fused oneDNN encoder where it applies (compute/fused_encoder.py, with {})"


def fused_attention() -> str:
    """How the fused encoder attends on this machine (the compiled kernel where it is built)."""
    from rerank_scaling.compute.fused_encoder import encoder_kernels

    return "the compiled packed_attention and row_layer_norm kernels" if encoder_kernels() else "SDPA"


def final_checkpoints(results: Path, prefixes: list[str] | None = None) -> dict[str, Path]:
    """Run name -> its last ckpt-XX directory, for every trained run under ``results/checkpoints``
    (only those whose names start with one of ``prefixes``, where given)."""
    finals = {}
    for run in sorted((results / "checkpoints").iterdir()):
        ckpts = sorted(run.glob("ckpt-*/checkpoint.json"))
        if ckpts and (prefixes is None or run.name.startswith(tuple(prefixes))):
            finals[run.name] = ckpts[-1].parent
    return finals


def run_splits(results: Path, settings: EvalSettings, names: list[str]) -> list[SplitData]:
    """The evaluation's splits ``names`` of a finished run: its collection and BM25 runs, reranked
    as ``settings`` say."""
    return [
        load_split(
            str(results / "data" / "collection"),
            str(results / "bm25" / "runs" / f"{name}.trec"),
            name,
            settings.rerank_depth,
            (settings.max_queries or {}).get(name),
            settings.seed,
        )
        for name in names
    ]


class NearTieReports(logging.Handler):
    """Collects the :class:`NearTieReport` that ``score_pairs`` logs for each split it scores in bf16."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.reports: list[NearTieReport] = []
        logger = logging.getLogger("rerank_scaling.evaluation.rerank")
        logger.setLevel(logging.INFO)
        logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "near_ties"):
            self.reports.append(record.near_ties)


def score(
    ckpt: Path, splits: list[SplitData], settings: EvalSettings, max_length: int, label: str, work: Path
) -> tuple[pd.DataFrame, float, dict[str, pd.Series]]:
    """Per-query rows of one checkpoint on ``splits`` (run renamed ``label``), the seconds taken and
    each split's scores ((qid, docid) -> score, from the evaluation's scores cache)."""
    start = time.perf_counter()
    cache = work / label.replace("|", "_")
    _, per_query = evaluate_checkpoints([ckpt], splits, settings, max_length, "cpu", work / "runs", cache)
    seconds = time.perf_counter() - start
    scores = {}
    for split in splits:
        (path,) = cache.glob(f"{ckpt.name}.{split.name}.scores.*.parquet")
        scores[split.name] = pd.read_parquet(path).set_index(["qid", "docid"])["score"]
    return per_query.assign(run=label), seconds, scores


def seed_spreads(metrics: pd.DataFrame) -> pd.Series:
    """(objective, split, metric) -> the largest max - min over seeds of one size's final value."""
    final = final_rows(metrics[metrics["run"] != "bm25"])
    per_size = final.groupby(["objective", "split", "metric", "model"])["value"].agg(
        lambda v: v.max() - v.min()
    )
    counts = final.groupby(["objective", "split", "metric", "model"])["seed"].nunique()
    return per_size[counts > 1].groupby(level=["objective", "split", "metric"]).max()


def compare(per_query: pd.DataFrame, pairs: list[tuple[str, str, str]], splits: list[str]) -> pd.DataFrame:
    """For each (run, first label, second label) and split and metric: both values, their difference,
    the first's standard error over queries and the paired standard error of the difference."""
    rows = []
    metrics = sorted(m for m in per_query["metric"].unique() if not m.endswith("_dropped"))
    for split in splits:
        for metric in metrics:
            bootstrap = QueryTable.build(per_query, metric, split)
            for run, first, second in pairs:
                a, b = (first, 0), (second, 0)
                if a not in bootstrap.weights.columns or b not in bootstrap.weights.columns:
                    continue
                values = [float((bootstrap.weighted[t].sum()) / bootstrap.weights[t].sum()) for t in (a, b)]
                per_query_values = [bootstrap.weighted[t] / bootstrap.weights[t] for t in (a, b)]
                changed = int(((per_query_values[0] - per_query_values[1]).abs() > 1e-12).sum())
                rows.append(
                    {
                        "run": run,
                        "split": split,
                        "metric": metric,
                        "first": values[0],
                        "second": values[1],
                        "difference": values[1] - values[0],
                        "se": bootstrap.standard_error({a: 1.0}),
                        "paired_se": bootstrap.standard_error({a: 1.0, b: -1.0}),
                        "changed": changed,  # queries whose value differs
                    }
                )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, help="a finished fp32-trained run's results directory")
    parser.add_argument("--bf16-trained", type=Path, default=None, help="the same config trained in bf16")
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--splits", nargs="+", default=["dev"])
    parser.add_argument("--metric", default="nDCG@10", help="the metric of the per-run table")
    parser.add_argument("--quarter", type=float, default=0.25, help="the scoring bar, in standard errors")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", nargs="+", default=None, help="only the runs whose names start so")
    parser.add_argument(
        "--compile", choices=["on", "off"], default="off", help="evaluation.compile of the bf16 scoring"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    config = yaml.safe_load(args.config.read_text())
    base = settings_from_dict(EvalSettings, config["evaluation"], "evaluation")
    base = replace(base, final_only_splits=(), compile=args.compile)
    max_length = config["training"]["max_length"]
    splits = run_splits(args.results, base, args.splits)
    finals = final_checkpoints(args.results, args.runs)
    trained_bf16 = final_checkpoints(args.bf16_trained) if args.bf16_trained else {}
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    tables, seconds = [], []
    collected = NearTieReports()
    near: dict[tuple[str, str], dict[str, float]] = {}  # (run, split) -> the near-tie rescoring's record
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for run, ckpt in finals.items():
            timing, scores = {}, {}
            order = ("fp32", "bf16") if len(seconds) % 2 == 0 else ("bf16", "fp32")  # either goes first
            for precision in order:
                collected.reports.clear()
                rows, timing[precision], scores[precision] = score(
                    ckpt, splits, replace(base, precision=precision), max_length, f"{run}|{precision}", work
                )
                tables.append(rows)
                if precision == "bf16":
                    reports = list(collected.reports)
            seconds.append(timing)
            if len(reports) != len(splits):
                raise RuntimeError(f"{run}: {len(reports)} near-tie reports for {len(splits)} splits")
            for split, report in zip(splits, reports, strict=True):
                fp32, bf16 = scores["fp32"][split.name], scores["bf16"][split.name]
                error = float((bf16 - fp32.reindex(bf16.index)).abs().max())
                calibration = report.calibration_error
                near[(run, split.name)] = {
                    "fraction": report.fraction,
                    "rescored": report.rescored,
                    "pairs": report.pairs,
                    "rounds": report.rounds,
                    "raised": report.bound > report.factor * calibration * (1 + 1e-9),
                    "bound": report.bound,
                    "over_bound": error / report.bound if report.bound else np.inf,
                    "over_calibration": error / calibration if calibration else np.inf,
                }
            if run in trained_bf16:
                rows, _, _ = score(
                    trained_bf16[run],
                    splits,
                    replace(base, precision="fp32"),
                    max_length,
                    f"{run}|bf16-trained",
                    work,
                )
                tables.append(rows)
    elapsed = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    per_query = pd.concat(tables, ignore_index=True).assign(checkpoint=0)

    scoring = compare(per_query, [(r, f"{r}|fp32", f"{r}|bf16") for r in finals], args.splits)
    scoring["ratio"] = scoring["difference"].abs() / scoring["se"]
    worst = scoring.loc[scoring["ratio"].idxmax()]
    speedups = [t["fp32"] / t["bf16"] for t in seconds]
    queries = ", ".join(f"{s.name} {len(s.qrels)}" for s in splits)
    how = COMPILED if args.compile == "on" else FUSED.format(fused_attention())
    bf16_path = (
        f"with the weights cast to bf16 once{how}, "
        f"near ties rescored in fp32, eager (safety factor {cpu_profile().near_tie_factor:g}, the CPU "
        f"kind's, `{cpu_kind()}`; calibration sample {CALIBRATION_PAIRS} pairs)"
        if casts_weights("bf16", "cpu")
        else "under autocast"
    )
    checks = pd.DataFrame(near.values())
    queries_of = {s.name: len(s.qrels) for s in splits}
    lines = [
        f"# bfloat16 against the statistical bar ({args.results}, final checkpoints)",
        "",
        f"CPU: **{cpu_name()}**; bf16 scoring {bf16_path}; torch {torch.__version__}, {args.threads} "
        "thread(s); load average "
        f"{load_before:.2f} before, {load_after:.2f} after; run time {elapsed / 60:.1f} min. Queries: "
        f"{queries}; BM25 top {base.rerank_depth} reranked; standard errors: bootstrap over queries "
        "(1000 resamples).",
        "",
        "## 1. Scoring in bf16 (the same checkpoints)",
        "",
        f"- bar: |bf16 - fp32| < {args.quarter} x the metric's standard error over queries, for every "
        f"run, split and final metric ({len(scoring)} values): "
        f"**{'met' if (scoring['ratio'] < args.quarter).all() else 'NOT met'}**",
        f"- worst ratio |bf16 - fp32| / SE: **{worst['ratio']:.3f}** ({worst['run']}, {worst['split']}, "
        f"{worst['metric']}: {worst['difference']:+.4f} against SE {worst['se']:.4f}); values above "
        f"{args.quarter}: {int((scoring['ratio'] >= args.quarter).sum())}",
        f"- largest |bf16 - fp32| of a final {args.metric}: "
        f"{scoring.loc[scoring['metric'] == args.metric, 'difference'].abs().max():.4f}",
        f"- scoring time fp32 / bf16 (checkpoint load, scoring, metrics; {len(args.splits)} split(s)): "
        "median "
        f"**{statistics.median(speedups):.2f}x**, range {min(speedups):.2f}-{max(speedups):.2f}x over "
        f"{len(speedups)} checkpoints",
        f"- pairs scored in fp32 (calibration sample and near ties): {checks['rescored'].sum()} of "
        f"{checks['pairs'].sum()} (**{checks['rescored'].sum() / checks['pairs'].sum():.1%}**; per "
        f"checkpoint and split {checks['fraction'].min():.1%}-{checks['fraction'].max():.1%}; rescoring "
        f"rounds {checks['rounds'].min()}-{checks['rounds'].max()}, median {checks['rounds'].median():g}; "
        f"e raised by a rescored pair in {int(checks['raised'].sum())} of {len(checks)})",
        f"- the bound e on |bf16 - fp32|: largest |bf16 - fp32| of a scored pair / e, worst over "
        f"{len(checks)} checkpoint-splits **{checks['over_bound'].max():.2f}** (at most 1: every order of "
        f"candidates of different grades is fp32's); / the calibration sample's largest |bf16 - fp32|, worst "
        f"{checks['over_calibration'].max():.2f} (median {checks['over_calibration'].median():.2f}; the "
        f"safety factor is {cpu_profile().near_tie_factor:g})",
        "",
        "Values above the bar (a query's value moves in steps: one query of n changing moves the mean "
        "by its change / n):",
        "",
        "| run | split | metric | difference | SE | ratio | queries changed |",
        "|---|---|---|---:|---:|---:|---:|",
        *(
            f"| {r['run']} | {r['split']} | {r['metric']} | {r['difference']:+.4f} | {r['se']:.4f} | "
            f"{r['ratio']:.3f} | {r['changed']} of {queries_of[r['split']]} |"
            for _, r in scoring[scoring["ratio"] >= args.quarter].sort_values("ratio").iterrows()
        ),
        "",
        "Worst ratio per metric:",
        "",
        "| metric | worst |bf16 - fp32| / SE | its difference | SE |",
        "|---|---:|---:|---:|",
    ]
    for metric, group in scoring.groupby("metric"):
        row = group.loc[group["ratio"].idxmax()]
        lines.append(f"| {metric} | {row['ratio']:.3f} | {row['difference']:+.4f} | {row['se']:.4f} |")
    lines += [
        "",
        f"{args.metric} per run:",
        "",
        "| run | split | fp32 | bf16 | difference | SE | ratio | fp32 s | bf16 s | speed-up | fp32-scored | "
        "e | error / e |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    times = dict(zip(finals, seconds, strict=True))
    for _, r in scoring[scoring["metric"] == args.metric].iterrows():
        t, n = times[r["run"]], near[(r["run"], r["split"])]
        lines.append(
            f"| {r['run']} | {r['split']} | {r['first']:.4f} | {r['second']:.4f} | {r['difference']:+.4f} | "
            f"{r['se']:.4f} | {r['ratio']:.3f} | {t['fp32']:.2f} | {t['bf16']:.2f} | "
            f"{t['fp32'] / t['bf16']:.2f}x | {n['fraction']:.1%} | {n['bound']:.3g} | {n['over_bound']:.2f} |"
        )

    if trained_bf16:
        training = compare(
            per_query,
            [(r, f"{r}|fp32", f"{r}|bf16-trained") for r in finals if r in trained_bf16],
            args.splits,
        )
        objective = training["run"].str.split("__").str[1]
        spreads = seed_spreads(pd.read_parquet(args.results / "metrics" / "all.parquet"))
        training["seed_spread"] = [
            spreads.get((o, s, m), np.nan)
            for o, s, m in zip(objective, training["split"], training["metric"], strict=True)
        ]
        training["ratio_se"] = training["difference"].abs() / (1.96 * training["paired_se"])
        training["ratio_spread"] = training["difference"].abs() / training["seed_spread"]
        training["noise"] = np.fmax(1.96 * training["paired_se"], training["seed_spread"])
        training["ratio"] = training["difference"].abs() / training["noise"]
        training["within"] = [
            verdict(abs(d), se, sp) == "no"
            for d, se, sp in zip(
                training["difference"], training["paired_se"], training["seed_spread"], strict=True
            )
        ]
        worst = training.loc[training["ratio"].idxmax()]
        outside = training[~training["within"]]
        lines += [
            "",
            f"## 2. Training in bf16 ({args.bf16_trained}, the same seeds; both scored in fp32)",
            "",
            "- bar: |bf16-trained - fp32-trained| within max(1.96 x paired SE, seed spread), for every run, "
            f"split and final metric ({len(training)} values): **{len(training) - len(outside)} within, "
            f"{len(outside)} outside** (at a 5% test, about {0.05 * len(training):.0f} of {len(training)} "
            "would fall outside by chance alone if the precisions trained alike)",
            f"- worst ratio |difference| / max(1.96 x paired SE, seed spread): **{worst['ratio']:.2f}** "
            f"({worst['run']}, {worst['split']}, {worst['metric']}: {worst['difference']:+.4f}; paired SE "
            f"{worst['paired_se']:.4f}, seed spread {worst['seed_spread']:.4f})",
            f"- {args.metric}: worst |difference| / (1.96 x paired SE) "
            f"{training.loc[training['metric'] == args.metric, 'ratio_se'].max():.2f}, / seed spread "
            f"{training.loc[training['metric'] == args.metric, 'ratio_spread'].max():.2f}",
            "",
            f"{args.metric} per run (fp32-trained vs bf16-trained):",
            "",
            "| run | split | fp32-trained | bf16-trained | difference | paired SE | seed spread | within |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for _, r in training[training["metric"] == args.metric].iterrows():
            lines.append(
                f"| {r['run']} | {r['split']} | {r['first']:.4f} | {r['second']:.4f} | "
                f"{r['difference']:+.4f} | {r['paired_se']:.4f} | {r['seed_spread']:.4f} | "
                f"{'yes' if r['within'] else '**no**'} |"
            )
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
