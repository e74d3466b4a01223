"""Stage: figures (PNG + PDF) and results/<run>/summary.md from the metrics table and the fits.

    python -m rerank_scaling.report.write_report --metrics all.parquet --per-query per_query.parquet \
        --laws DIR --metric nDCG@10 CE@16 --split dev test --figures DIR --summary summary.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.plotting import save_figure
from rerank_scaling.report import figures
from rerank_scaling.report.figure_names import slug
from rerank_scaling.report.summary import EVIDENCE_METRIC, summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--per-query", required=True, help="per-query metric table (merge stage)")
    parser.add_argument("--laws", required=True)
    parser.add_argument("--metric", nargs="+", required=True)
    parser.add_argument("--split", nargs="+", required=True)
    parser.add_argument("--figures", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--data-checks", default=None, help="data/checks.json of the prepare_data stage")
    parser.add_argument("--example-counts", default=None, help="examples/counts.json of the examples stage")
    parser.add_argument("--planning", default=None, help="planning/ of the plan stage (its decisions.csv)")
    args = parser.parse_args(argv)
    metrics = pd.read_parquet(args.metrics)
    laws_dir, out = Path(args.laws), Path(args.figures)
    fits = pd.read_parquet(laws_dir / "fits.parquet")
    forecasts = pd.read_parquet(laws_dir / "forecasts.parquet")
    allocation = pd.read_parquet(laws_dir / "allocation.parquet")
    for metric in args.metric:
        for split in args.split:
            name = f"{slug(metric)}__{split}"
            save_figure(
                figures.model_scaling(metrics, fits, forecasts, metric, split), out / f"model_scaling__{name}"
            )
            save_figure(figures.data_scaling(metrics, fits, metric, split), out / f"data_scaling__{name}")
            save_figure(
                figures.joint_surface(metrics, fits, forecasts, metric, split), out / f"joint_surface__{name}"
            )
            save_figure(
                figures.compute_frontier(allocation, metric, split), out / f"compute_frontier__{name}"
            )
    save_figure(
        figures.equal_compute_bars(pd.read_parquet(laws_dir / "equal_compute.parquet")), out / "equal_compute"
    )
    per_query = pd.read_parquet(args.per_query, filters=[("metric", "==", EVIDENCE_METRIC)])
    checks = json.loads(Path(args.data_checks).read_text()) if args.data_checks else None
    counts = json.loads(Path(args.example_counts).read_text()) if args.example_counts else None
    planning = Path(args.planning) if args.planning else None
    write_text(args.summary, summary(metrics, laws_dir, per_query, checks, counts, planning))


if __name__ == "__main__":
    main()
