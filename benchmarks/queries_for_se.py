"""How many evaluation queries a finished run would need for a target standard error, what the
built-in collection has, and what scoring them at each run's final checkpoint would cost.

    python benchmarks/queries_for_se.py results/cand --target 0.012 \
        --out benchmarks/results/queries_for_se.md

Per run: the standard deviation over queries of its final ``--metric`` on ``--split`` (the
per-query table), and the queries n = ceil((sd / target)^2) that bring its standard error sd / sqrt(n)
to the target. The collection's size: passages in the corpus (the built-in ICT collection gives
each passage at most one query) and the queries each split already uses. The cost: the evaluation
stage's CPU seconds (Snakemake's benchmark files) per scored (query, checkpoint), times the extra
queries, scored once per run (a final-only split, ``evaluation.final_only_splits``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd
from benchmark_output import emit

from rerank_scaling.precision import cpu_name
from rerank_scaling.report.scaling_evidence import final_rows
from rerank_scaling.workflow.timing import job_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path)
    parser.add_argument("--split", default="dev")
    parser.add_argument("--metric", default="nDCG@10")
    parser.add_argument("--target", type=float, default=0.012)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    metrics = pd.read_parquet(args.results / "metrics" / "all.parquet")
    per_query = pd.read_parquet(args.results / "metrics" / "per_query.parquet")
    trained = metrics[(metrics["run"] != "bm25") & (metrics["metric"] == args.metric)]
    finals = final_rows(trained[trained["split"] == args.split])[["run", "checkpoint"]]
    rows = per_query[(per_query["metric"] == args.metric) & (per_query["split"] == args.split)]
    rows = rows.merge(finals, on=["run", "checkpoint"])
    spread = rows.groupby("run")["value"].agg(["std", "count"])
    spread["se"] = spread["std"] / spread["count"] ** 0.5
    spread["needed"] = [math.ceil((sd / args.target) ** 2) for sd in spread["std"]]

    passages = sum(1 for _ in (args.results / "data" / "collection" / "corpus.jsonl").open())
    used = {
        path.stem: sum(1 for line in path.open() if line.strip())
        for path in sorted((args.results / "data" / "collection" / "queries").glob("*.tsv"))
    }
    scored = trained.groupby("run").apply(
        lambda g: (g.groupby(["split", "checkpoint"])["queries"].first()).sum(), include_groups=False
    )
    eval_cpu = sum(j.cpu_s for j in job_times(args.results) if j.stage == "eval" and j.cpu_s == j.cpu_s)
    per_query_s = eval_cpu / scored.sum()
    needed = int(spread["needed"].max())
    extra = max(0, needed - int(spread["count"].max()))
    lines = [
        f"# Queries for a final {args.split} {args.metric} standard error <= {args.target} ({args.results})",
        "",
        f"CPU: **{cpu_name()}**.",
        "",
        f"- standard error over queries of the runs' final {args.metric} now: {spread['se'].min():.3f}-"
        f"{spread['se'].max():.3f} ({int(spread['count'].max())} queries); sd over queries "
        f"{spread['std'].min():.3f}-{spread['std'].max():.3f}",
        f"- queries for SE <= {args.target} in every run: **{needed}** (median run "
        f"{int(spread['needed'].median())})",
        f"- the collection: {passages} passages (at most one query each); the splits use "
        + ", ".join(f"{split} {n}" for split, n in used.items())
        + f"; {passages - sum(used.values())} passages carry no query",
        f"- evaluation cost: {eval_cpu:.0f} CPU s for {int(scored.sum())} scored (query, checkpoint) "
        f"pairs of queries, {per_query_s * 1000:.1f} CPU ms each (BM25 top-k reranked, job start-up "
        f"included); {extra} more queries scored at each of {len(spread)} runs' final checkpoint: "
        f"**{extra * len(spread) * per_query_s / 60:.1f} CPU min**, "
        f"{extra * len(spread) * per_query_s / 120:.1f} min on 2 cores",
        "",
        "| run | sd over queries | SE now | queries for the target |",
        "|---|---:|---:|---:|",
        *(
            f"| {run} | {r['std']:.3f} | {r['se']:.4f} | {int(r['needed'])} |"
            for run, r in spread.sort_values("needed").iterrows()
        ),
    ]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
