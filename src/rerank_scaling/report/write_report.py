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
from rerank_scaling.report import figures
from rerank_scaling.report.scaling_evidence import final_standard_errors, scaling_evidence

PER_METRIC = ("model_scaling", "data_scaling", "joint_surface", "compute_frontier")


def slug(metric: str) -> str:
    """A file-name-safe metric name: nDCG@10 -> nDCG-10."""
    return metric.replace("@", "-").replace("/", "-")


EVIDENCE_METRIC = "nDCG@10"
VERDICT_WORDS = {"yes": "exceeds its noise", "no": "within its noise", "unknown": "unknown (no yardstick)"}


def _fmt(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.4f}"


def claims(evidence: pd.DataFrame) -> list[str]:
    """One sentence per (objective, attention, split): each comparison, its yardsticks, its verdict."""
    lines = []
    for _, r in evidence.iterrows():
        spread = "no seeds" if pd.isna(r["seed_spread"]) else f"seed spread {_fmt(r['seed_spread'])}"
        lines.append(
            f"- **{r['objective']} ({r['attention']}), {r['split']} {r['metric']}, {r['queries']} queries:** "
            f"training gain {_fmt(r['training_gain'])} (first {_fmt(r['first_checkpoint'])} -> final "
            f"{_fmt(r['final_checkpoint'])}, mean of sizes; SE {_fmt(r['training_gain_se'])}): "
            f"{VERDICT_WORDS[r['training_gain_verdict']]}. Size gap {r['largest']} - {r['smallest']} "
            f"{_fmt(r['size_gap'])} ({_fmt(r['largest_final'])} vs {_fmt(r['smallest_final'])}; SE "
            f"{_fmt(r['size_gap_se'])}, {spread}): {VERDICT_WORDS[r['size_gap_verdict']]}. "
            f"{r['largest']} - BM25 {_fmt(r['largest_minus_bm25'])} ({_fmt(r['largest_final'])} vs "
            f"{_fmt(r['bm25'])}; SE {_fmt(r['largest_minus_bm25_se'])}): "
            f"{VERDICT_WORDS[r['largest_beats_bm25']]}. Real scaling: **{r['real_scaling']}**."
        )
    return lines


def data_check_lines(checks: dict | None) -> list[str]:
    """The prepare_data stage's checks (``data/checks.json``): per split, queries and judgements, and a
    warning for judgements naming unknown documents or queries (dropped below
    ``dataset.max_unknown_qrels_share``; above it the job failed)."""
    if not checks:
        return ["(no data checks recorded)"]
    rows = pd.DataFrame(checks["splits"])
    lines = [rows.to_markdown(index=False), ""]
    for row in rows.itertuples():
        if row.unknown_documents or row.unknown_queries:
            lines.append(
                f"- **Warning**: {row.split}: {row.unknown_documents} judgements name documents not in the "
                f"corpus and {row.unknown_queries} name unknown queries ({row.dropped_share:.1%} of "
                "judgements, dropped); results on this split are scored without them."
            )
    return lines


def summary(
    metrics: pd.DataFrame,
    laws_dir: Path,
    per_query: pd.DataFrame | None = None,
    data_checks: dict | None = None,
) -> str:
    """Key numbers: BM25 vs every run's final checkpoint (with the standard error over queries),
    the scaling evidence per split with its noise yardsticks and verdicts, forecast errors, exponents,
    and what the data checks found."""
    final = metrics[metrics["step"] == metrics.groupby("run")["step"].transform("max")]
    main = final[final["metric"].isin(["nDCG@10", "RR@10", "CE@16", "CE@64"])]
    pivot = main.pivot_table(
        index=["objective", "model", "seed"], columns=["split", "metric"], values="value"
    )
    errors = final_standard_errors(metrics, per_query, EVIDENCE_METRIC)
    if len(errors):
        errors = errors.pivot_table(
            index=["objective", "model", "seed"], columns="split", values=[EVIDENCE_METRIC, "se"]
        )
    splits = sorted(metrics.loc[metrics["metric"] == EVIDENCE_METRIC, "split"].unique())
    evidence = pd.concat(
        [scaling_evidence(metrics, per_query, EVIDENCE_METRIC, split) for split in splits]
        or [pd.DataFrame()],
        ignore_index=True,
    )
    parts = [
        "# rerank-scaling summary",
        "",
        "## Final checkpoints vs BM25",
        "",
        pivot.round(4).to_markdown(),
        "",
        f"## Final {EVIDENCE_METRIC} per run, with its standard error over queries (bootstrap)",
        "",
        errors.round(4).to_markdown() if len(errors) else "(no runs)",
        "",
        f"## Scaling evidence ({EVIDENCE_METRIC}): training gain, size gap, BM25, each with its yardsticks",
        "",
        "SE: standard error of the difference from a paired bootstrap over the split's queries; seed "
        "spread: max - min over seeds of one size (where there are seeds). A verdict is yes when the "
        "difference exceeds 1.96 SE and the seed spread, no when it does not, unknown without a "
        "per-query yardstick.",
        "",
        evidence.round(4).to_markdown(index=False) if len(evidence) else "(no trained runs)",
        "",
        "## Claims",
        "",
        *(claims(evidence) if len(evidence) else ["(no trained runs)"]),
        "",
        "## Data checks",
        "",
        *data_check_lines(data_checks),
        "",
    ]
    for name, title in (
        ("forecast_errors", "Held-out forecast errors"),
        (
            "table08_final_checkpoint",
            "Held-out sizes at their final checkpoint: observed, forecast, 95% interval (paper Table 8)",
        ),
        ("exponents", "Fitted exponents"),
        ("equal_compute", "Equal-compute comparison"),
    ):
        table = laws_dir / "tables" / f"{name}.md"
        parts += [f"## {title}", "", table.read_text() if table.exists() else "(not available)", ""]
    return "\n".join(parts)


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
    per_query = pd.read_parquet(args.per_query, filters=[("metric", "==", EVIDENCE_METRIC)])
    checks = json.loads(Path(args.data_checks).read_text()) if args.data_checks else None
    write_text(args.summary, summary(metrics, laws_dir, per_query, checks))


if __name__ == "__main__":
    main()
