"""Stage: figures (PNG + PDF) and results/<run>/summary.md from the metrics table and the fits.

    python -m rerank_scaling.stages.report --metrics all.parquet --laws DIR --metric nDCG@10 CE@16 \
        --split dev test --figures DIR --summary summary.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from rerank_scaling import figures
from rerank_scaling.atomic import write_text
from rerank_scaling.scaling_evidence import scaling_evidence

PER_METRIC = ("model_scaling", "data_scaling", "joint_surface", "compute_frontier")


def slug(metric: str) -> str:
    """A file-name-safe metric name: nDCG@10 -> nDCG-10."""
    return metric.replace("@", "-").replace("/", "-")


def summary(metrics: pd.DataFrame, laws_dir: Path) -> str:
    """Key numbers: BM25 vs every run's final checkpoint, forecast errors, exponents."""
    final = metrics[metrics["step"] == metrics.groupby("run")["step"].transform("max")]
    main = final[final["metric"].isin(["nDCG@10", "RR@10", "CE@16", "CE@64"])]
    pivot = main.pivot_table(
        index=["objective", "model", "seed"], columns=["split", "metric"], values="value"
    )
    evidence = scaling_evidence(metrics)
    parts = [
        "# rerank-scaling summary",
        "",
        "## Final checkpoints vs BM25",
        "",
        pivot.round(4).to_markdown(),
        "",
        "## Scaling evidence (dev nDCG@10): training gain, size gap vs seed spread, BM25",
        "",
        evidence.round(4).to_markdown(index=False) if len(evidence) else "(no trained runs)",
        "",
    ]
    for name, title in (
        ("forecast_errors", "Held-out forecast errors"),
        ("exponents", "Fitted exponents"),
        ("equal_compute", "Equal-compute comparison"),
    ):
        table = laws_dir / "tables" / f"{name}.md"
        parts += [f"## {title}", "", table.read_text() if table.exists() else "(not available)", ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--laws", required=True)
    parser.add_argument("--metric", nargs="+", required=True)
    parser.add_argument("--split", nargs="+", required=True)
    parser.add_argument("--figures", required=True)
    parser.add_argument("--summary", required=True)
    args = parser.parse_args(argv)
    metrics = pd.read_parquet(args.metrics)
    laws_dir, out = Path(args.laws), Path(args.figures)
    fits = pd.read_parquet(laws_dir / "fits.parquet")
    forecasts = pd.read_parquet(laws_dir / "forecasts.parquet")
    allocation = pd.read_parquet(laws_dir / "allocation.parquet")
    for metric in args.metric:
        for split in args.split:
            name = f"{slug(metric)}__{split}"
            figures.save_figure(
                figures.model_scaling(metrics, fits, forecasts, metric, split), out / f"model_scaling__{name}"
            )
            figures.save_figure(
                figures.data_scaling(metrics, fits, metric, split), out / f"data_scaling__{name}"
            )
            figures.save_figure(
                figures.joint_surface(metrics, fits, forecasts, metric, split), out / f"joint_surface__{name}"
            )
            figures.save_figure(
                figures.compute_frontier(allocation, metric, split), out / f"compute_frontier__{name}"
            )
    figures.save_figure(
        figures.equal_compute_bars(pd.read_parquet(laws_dir / "equal_compute.parquet")), out / "equal_compute"
    )
    write_text(args.summary, summary(metrics, laws_dir))


if __name__ == "__main__":
    main()
