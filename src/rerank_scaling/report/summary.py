"""results/<run>/summary.md: the key numbers of a run in Markdown, the answer first.

In this order: the answer (one sentence per objective, :mod:`.answer_headline`: the held-out
forecast, its status, the observation and what to train, from ``planning/decisions.csv``; then the
question and the held-out forecasts with their status, in the words of :mod:`.answer`); the
evidence (the claims, the held-out size's final checkpoint against the gap between the two largest
sizes (:mod:`.held_out_check`), the scaling evidence per split with its noise
yardsticks and verdicts (:mod:`.scaling_evidence`), what the data checks found); then the raw tables
(BM25 against every run's final checkpoint, each run's standard error, and the forecast errors,
Table 8, exponents and equal-compute tables of the fit stage).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rerank_scaling.registries.size_axes import axis_of_column
from rerank_scaling.report.answer import forecast_lines
from rerank_scaling.report.answer_headline import headline_lines
from rerank_scaling.report.answer_inputs import decisions, question, shown_forecasts, with_sizes
from rerank_scaling.report.figures import size_column
from rerank_scaling.report.held_out_check import NO_CHECK, run_check
from rerank_scaling.report.scaling_evidence import (
    VERDICT_WORDS,
    final_rows,
    final_standard_errors,
    scaling_evidence,
)

EVIDENCE_METRIC = "nDCG@10"


def _fmt(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.4f}"


def claims(evidence: pd.DataFrame) -> list[str]:
    """One sentence per (objective, attention, split): each comparison, its yardsticks, its verdict."""
    lines = []
    for _, r in evidence.iterrows():
        spread = (
            "no seeds"
            if pd.isna(r["seed_spread"])
            else f"seed spread {_fmt(r['seed_spread'])} at {r['seed_spread_models']} (paired SE "
            f"{_fmt(r.get('seed_spread_se', float('nan')))})"
        )
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
    ``dataset.max_unknown_qrels_share``; above it the job failed) and for relevant judgements of
    documents without text (kept where ``dataset.allow_judged_empty_documents``)."""
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
        if getattr(row, "judged_empty_documents", 0):
            lines.append(
                f"- **Warning**: {row.split}: {row.judged_empty_documents} relevant judgements name "
                "documents without text (kept: dataset.allow_judged_empty_documents); BM25 cannot "
                "retrieve them, so recall on this split stays below 1."
            )
    return lines


def example_count_lines(counts: dict | None) -> list[str]:
    """The examples job's ``examples/counts.json``: how many training queries give examples."""
    if not counts:
        return []
    dropped = ", ".join(f"{n} ({kind})" for kind, n in counts["dropped_for_negatives"].items())
    return [
        f"Training queries: {counts['queries']}; without a judgement at examples.positive_threshold: "
        f"{counts['without_positive']}; left out by examples.max_queries: "
        f"{counts['left_out_by_max_queries']}; dropped for too few BM25 negatives: {dropped}.",
        "",
    ]


def warning_lines(counts: dict | None) -> list[str]:
    """The examples job's warnings (thin training data), shown before the answer they qualify."""
    found = counts["warnings"] if counts else []
    return [*(f"- **Warning**: {warning}" for warning in found), ""] if found else []


def held_out_lines(check: pd.DataFrame, joint: str | None) -> list[str]:
    """The held-out size's final checkpoint against the gap between the two largest sizes
    (:func:`rerank_scaling.report.held_out_check.run_check`'s table and planning's joint protocol),
    for the model law and the joint law planning uses."""
    if check.empty:
        return [NO_CHECK]
    return [
        f"Recommended: `{joint}` (fitting.joint_protocol, the law planning uses); the model law for "
        "comparison. miss = |forecast - observed|; gap = held-out final - largest fitted final; gap_se: "
        "its paired standard error (the SE of the mean per-query difference over the same queries); "
        "gap_verdict: yes when the gap exceeds 1.96 gap_se, worse when it lies below -1.96 gap_se; "
        "queries_for_third_of_gap: the queries at which gap_se would be gap / 3.",
        "",
        check.round(4).to_markdown(index=False),
    ]


def answer_lines(
    metrics: pd.DataFrame,
    laws_dir: Path,
    planning_dir: Path | None = None,
    check: pd.DataFrame | None = None,
) -> list[str]:
    """The answer first: one sentence per objective on the first split (the plan's verdicts from
    ``planning_dir``; ``check``: :func:`.held_out_check.run_check`'s table, the sentences'
    comparison with the largest fitted size), then per split with a held-out forecast of the
    evidence metric, the question and the forecasts
    (:func:`rerank_scaling.report.answer.forecast_lines`), then where the verdicts are."""
    path = laws_dir / "forecasts.parquet"
    forecasts = pd.read_parquet(path) if path.exists() else pd.DataFrame()
    axis = axis_of_column(size_column(metrics, forecasts)).name
    rows = metrics[metrics["metric"] == EVIDENCE_METRIC]
    fitted = forecasts[forecasts["metric"] == EVIDENCE_METRIC] if len(forecasts) else forecasts
    splits = sorted(fitted["split"].unique()) if len(fitted) else sorted(rows["split"].unique())[:1]
    lines = []
    for split in splits:
        shown = with_sizes(shown_forecasts(laws_dir, EVIDENCE_METRIC, split), metrics, axis)
        if split == splits[0]:
            verdicts = decisions(planning_dir, EVIDENCE_METRIC, split) if planning_dir else None
            lines += headline_lines(shown, verdicts, check)
        lines += forecast_lines(question(metrics, EVIDENCE_METRIC, split, axis), shown)
    return [
        *lines,
        "## What to train next",
        "",
        "The plan stage's verdicts: `answer.md` (this answer with them) and `planning/plan.md`.",
        "",
    ]


def summary(
    metrics: pd.DataFrame,
    laws_dir: Path,
    per_query: pd.DataFrame | None = None,
    data_checks: dict | None = None,
    example_counts: dict | None = None,
    planning_dir: Path | None = None,
) -> str:
    """Key numbers, the answer first: the question and held-out forecasts; then the evidence (claims,
    held-out check, scaling evidence with its yardsticks, data checks); then the raw tables (BM25 vs
    every run's final checkpoint with its standard error, forecast errors, Table 8, exponents).
    ``example_counts``: the examples job's counts.json; its warnings (thin training data) come first.
    ``planning_dir``: the plan stage's directory (what to train, in the answer's sentences)."""
    final = final_rows(metrics)
    main = final[final["metric"].isin(["nDCG@10", "RR@10", "CE@16", "CE@64"])]
    pivot = main.pivot_table(
        index=["objective", "model", "seed"], columns=["split", "metric"], values="value"
    )
    errors = final_standard_errors(metrics, per_query, EVIDENCE_METRIC)
    errors_by_run = (
        errors.pivot_table(
            index=["objective", "model", "seed"], columns="split", values=[EVIDENCE_METRIC, "se"]
        )
        if len(errors)
        else errors
    )
    splits = sorted(metrics.loc[metrics["metric"] == EVIDENCE_METRIC, "split"].unique())
    evidence = pd.concat(
        [scaling_evidence(metrics, per_query, EVIDENCE_METRIC, split) for split in splits]
        or [pd.DataFrame()],
        ignore_index=True,
    )
    check, joint = run_check(laws_dir, metrics, per_query, EVIDENCE_METRIC)  # once: answer and table
    parts = [
        "# rerank-scaling summary",
        "",
        *warning_lines(example_counts),
        *answer_lines(metrics, laws_dir, planning_dir, check),
        "## Claims",
        "",
        *(claims(evidence) if len(evidence) else ["(no trained runs)"]),
        "",
        f"## Held-out size, final checkpoint: forecast miss vs the gap between the two largest sizes "
        f"({EVIDENCE_METRIC})",
        "",
        *held_out_lines(check, joint),
        "",
        f"## Scaling evidence ({EVIDENCE_METRIC}): training gain, size gap, BM25, each with its yardsticks",
        "",
        "SE: paired standard error of the difference (the SE of the mean per-query difference over the "
        "split's queries); seed spread: max - min over seeds of one size (where there are seeds), "
        "seed_spread_se its paired SE. A verdict is yes when the "
        "difference exceeds 1.96 SE and the seed spread, no when it does not, unknown without a "
        "per-query yardstick.",
        "",
        evidence.round(4).to_markdown(index=False) if len(evidence) else "(no trained runs)",
        "",
        "## Data checks",
        "",
        *data_check_lines(data_checks),
        "",
        *example_count_lines(example_counts),
        "## Final checkpoints vs BM25",
        "",
        pivot.round(4).to_markdown(),
        "",
        f"## Final {EVIDENCE_METRIC} per run, with its standard error over queries (bootstrap)",
        "",
        errors_by_run.round(4).to_markdown() if len(errors) else "(no runs)",
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
