"""Write the docs' block on the embedded default from a run's own files (never hand-typed).

    python scripts/readme_default.py results/default docs/default-run.md

Reads ``metrics/all.parquet``, ``metrics/per_query.parquet`` (scaling evidence with its
yardsticks, and the held-out check, computed by the same functions as ``summary.md``),
``laws/tables/table08_final_checkpoint.csv`` (the held-out size's final checkpoint),
``laws/tables/calibration.csv`` (backtest coverage), ``laws/fits.parquet`` (fit statuses),
``workflow_time.json`` (the DAG's wall time) and ``benchmarks/*/*.tsv`` (Snakemake's per-job wall
time), and replaces the text between ``<!-- default-results:begin -->`` and
``<!-- default-results:end -->``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from rerank_scaling.report.held_out_check import NO_CHECK, run_check
from rerank_scaling.report.scaling_evidence import final_standard_errors, scaling_evidence
from rerank_scaling.report.summary import EVIDENCE_METRIC
from rerank_scaling.workflow.timing import JobTime, job_times

BEGIN, END = "<!-- default-results:begin -->", "<!-- default-results:end -->"


def _num(value: float) -> str:
    return f"{value:.3f}"


def _variant(objective: str, attention: str) -> str:
    """An objective, with its attention variant when it is not full attention."""
    return objective if attention == "full" else f"{objective} ({attention})"


def evidence_table(metrics: pd.DataFrame, per_query: pd.DataFrame) -> list[str]:
    rows = [
        "| split | objective | training gain (SE) | L1 final | largest final | size gap (SE) | seed spread "
        "| BM25 | largest − BM25 (SE) | gain verdict | gap verdict | beats BM25 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for split in ("dev", "test"):
        evidence = scaling_evidence(metrics, per_query, EVIDENCE_METRIC, split)
        for row in evidence.itertuples():
            rows.append(
                f"| {split} | {_variant(row.objective, row.attention)} | "
                f"{_num(row.training_gain)} ({_num(row.training_gain_se)}) | "
                f"{_num(row.smallest_final)} | {row.largest} "
                f"{_num(row.largest_final)} | {_num(row.size_gap)} ({_num(row.size_gap_se)}) | "
                f"{_num(row.seed_spread)} | {_num(row.bm25)} | {_num(row.largest_minus_bm25)} "
                f"({_num(row.largest_minus_bm25_se)}) | {row.training_gain_verdict} | "
                f"{row.size_gap_verdict} | {row.largest_beats_bm25} |"
            )
    return rows


def held_out_table(check: pd.DataFrame) -> list[str]:
    """The held-out size's final checkpoint against the gap between the two largest sizes."""
    if check.empty:
        return [NO_CHECK]
    rows = [
        "| split | objective | protocol (law) | held-out final | forecast | 95% interval | covered | miss "
        "| gap to largest fitted | miss < gap | paired SE of the gap | SE < gap / 3 "
        "| queries for SE = gap / 3 | forecast status | fit status |",
        "|---|---|---|---:|---:|---|---|---:|---:|---|---:|---|---:|---|---|",
    ]
    for r in check.sort_values(["split", "objective", "protocol"]).itertuples():
        rows.append(
            f"| {r.split} | {_variant(r.objective, r.attention)} | {r.protocol} ({r.law}) | "
            f"{r.held_out} {_num(r.observed)} | "
            f"{_num(r.forecast)} | [{_num(r.low)}, {_num(r.high)}] | {_yes(r.covered)} | {_num(r.miss)} | "
            f"{_num(r.gap)} ({r.largest_fitted}) | {_yes(r.miss_within_gap)} | {_num(r.gap_se)} | "
            f"{_yes(r.se_below_third_of_gap)} | {r.queries_for_third_of_gap:.0f} | "
            f"{r.forecast_status} | {r.status} |"
        )
    return rows


def _yes(flag: bool) -> str:
    return "yes" if flag else "**no**"


def standard_error_line(errors: pd.DataFrame) -> str:
    parts = [
        f"{split}: {group['se'].min():.3f}-{group['se'].max():.3f} over {int(group['queries'].max())} queries"
        for split, group in errors.groupby("split")
    ]
    return f"Standard error of each run's final {EVIDENCE_METRIC} over queries: " + "; ".join(parts) + "."


def precision_cost_line(times: list[JobTime], check: pd.DataFrame, metrics: pd.DataFrame) -> str:
    """What the SE < gap / 3 target would cost: evaluation time scales with the queries evaluated,
    so this run's measured evaluation time (``benchmarks/eval/*.tsv``) is scaled to the queries
    the held-out check asks for."""
    seconds = sum(t.wall_s for t in times if t.stage == "eval" and t.job not in ("bm25", "merge"))
    dev = check[check["split"] == "dev"] if not check.empty else check
    if dev.empty or not seconds:
        return ""
    queries = int(metrics.loc[(metrics["split"] == "dev") & (metrics["run"] != "bm25"), "queries"].max())
    needed = dev.groupby("objective")["queries_for_third_of_gap"].first()
    scale = needed.min() / queries
    return (
        f"What the precision target costs: with the observed gaps, SE < gap / 3 on dev would take "
        f"{needed.min():.0f}-{needed.max():.0f} dev queries instead of {queries} (column above). "
        f"Evaluation time grows with the queries: this run's checkpoint evaluation took "
        f"{seconds / 60:.1f} min of single-thread jobs (`benchmarks/eval/*.tsv`), so even the smallest "
        f"of those needs about {seconds * scale / 60:.0f} such minutes, {seconds * scale / 3600 / 2:.1f} "
        "hours on 2 cores."
    )


def workflow_time_line(results: Path) -> str:
    path = results / "workflow_time.json"
    if not path.exists():
        return "Whole-DAG wall time: not recorded (`workflow_time.json` is written when snakemake succeeds)."
    runs = json.loads(path.read_text())
    record = runs["last_fresh_run"] or runs["last_run"]
    kind = "a clean run (no data/ at start)" if record["fresh"] else "a partial re-run"
    return (
        f"Whole-DAG wall time (`workflow_time.json`): **{record['wall_min']:.1f} min** for {record['jobs']} "
        f"jobs on {record['cores']} cores, {kind}; load average at the end "
        f"{record['load_average_1min_at_end']} on {record['cpus_on_machine']} CPUs; "
        f"CPU: {run_cpu(results, record)}."
    )


def run_cpu(results: Path, record: dict) -> str:
    """The CPU the run ran on: ``workflow_time.json``'s, else the device of the profiles planning
    measured in the same run (``planning/profiles.json``; runs before the json recorded it)."""
    if record.get("cpu"):
        return str(record["cpu"])
    path = results / "planning" / "profiles.json"
    profiles = json.loads(path.read_text())["profiles"] if path.exists() else []
    devices = {str(p["device"]).removeprefix("cpu: ") for p in profiles if p.get("device")}
    return f"{', '.join(sorted(devices))} (`planning/profiles.json`)" if devices else "not recorded"


def calibration_line(tables: Path) -> str:
    try:
        calibration = pd.read_csv(tables / "calibration.csv")
    except pd.errors.EmptyDataError:  # too few sizes for a backtest: the fit stage writes an empty table
        return "Backtest coverage (`laws/tables/calibration.csv`): no backtests (too few fitted sizes)."
    at95 = calibration[calibration["nominal"] == 0.95]
    parts = [f"{row.metric} {row.protocol} ({row.law}): {row.statement}" for row in at95.itertuples()]
    return (
        "Backtest coverage at nominal 0.95 over independent units (one per objective and rolling "
        "origin at the final checkpoint, fitted sizes only; `laws/tables/calibration.csv`, exact "
        "binomial bounds): " + "; ".join(parts) + "."
    )


def status_line(fits: pd.DataFrame) -> str:
    counts = fits.groupby(["protocol", "status"]).size().unstack(fill_value=0)
    parts = [
        f"{protocol}: " + ", ".join(f"{int(n)} {status}" for status, n in row.items() if n)
        for protocol, row in counts.iterrows()
    ]
    return "Fit statuses (`laws/fits.parquet`): " + "; ".join(parts) + "."


def stage_times(times: list[JobTime]) -> str:
    parts = []
    for stage in sorted({t.stage for t in times}):
        jobs = [t for t in times if t.stage == stage]
        parts.append(f"{stage} {sum(t.wall_s for t in jobs) / 60:.1f} min ({len(jobs)} jobs)")
    return "Wall time per stage, summed over its jobs (`benchmarks/*/*.tsv`): " + ", ".join(parts) + "."


#: The jobs that follow every evaluation one after another (each reads the one before's output):
#: merge_metrics, fit_laws, plan, advise_next, report_answer (report_figures runs beside the last two).
TAIL_CHAIN = (
    ("eval", "merge"),
    ("laws", "fit"),
    ("planning", "plan"),
    ("planning", "advise"),
    ("report", "answer"),
)


def packing_line(times: list[JobTime], results: Path) -> str:
    """How far the run's wall time is from what its own jobs allow: the model jobs' summed wall time
    over the cores, plus the tail chain that starts only after the last evaluation (a lower bound:
    it leaves out the data jobs before the first training)."""
    path = results / "workflow_time.json"
    if not path.exists():
        return "Lower bound from the jobs: not computed (no `workflow_time.json`)."
    runs = json.loads(path.read_text())
    record = runs["last_fresh_run"] or runs["last_run"]
    cores = int(record["cores"])
    model = sum(t.wall_s for t in times if t.runs_a_model)
    tail = sum(t.wall_s for t in times if t.folder == "" and (t.stage, t.job) in TAIL_CHAIN)
    bound = model / cores + tail
    return (
        f"Lower bound from this run's own jobs: training and evaluation jobs summed {model / 60:.1f} min, "
        f"at least {model / cores / 60:.1f} min on {cores} cores, then the chain merge, fit, plan, advice "
        f"and answer that waits for the last evaluation took {tail / 60:.1f} min, so with these jobs the "
        f"DAG needs at least **{bound / 60:.1f} min** (measured {record['wall_min']:.1f} min)."
    )


def block(results: Path) -> str:
    metrics = pd.read_parquet(results / "metrics" / "all.parquet")
    per_query = pd.read_parquet(results / "metrics" / "per_query.parquet")
    errors = final_standard_errors(metrics, per_query, EVIDENCE_METRIC)
    check, _ = run_check(results / "laws", metrics, per_query, EVIDENCE_METRIC)
    times = job_times(results)
    tables = results / "laws" / "tables"
    lines = [
        f"Generated by `scripts/readme_default.py` from `{results}` ({EVIDENCE_METRIC}; SE: paired, the SE "
        "of the mean per-query difference over the same queries; a verdict is yes only when the "
        "difference exceeds 1.96 SE and the seed spread).",
        "",
        *evidence_table(metrics, per_query),
        "",
        "Held-out size at its final checkpoint (`laws/tables/table08_final_checkpoint.csv`; summary.md's "
        'section "Held-out size, final checkpoint"): the forecast\'s miss against the gap between the two '
        "largest sizes, and whether the standard error over queries is small enough to see that gap.",
        "",
        *held_out_table(check),
        "",
        standard_error_line(errors),
        "",
        precision_cost_line(times, check, metrics),
        "",
        calibration_line(tables),
        "",
        status_line(pd.read_parquet(results / "laws" / "fits.parquet")),
        "",
        workflow_time_line(results),
        "",
        stage_times(times),
        "",
        packing_line(times, results),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path)
    parser.add_argument("readme", type=Path)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{args.readme}: no {BEGIN} ... {END} markers")
    new = block(args.results)
    args.readme.write_text(pattern.sub(lambda _: f"{BEGIN}\n{new}{END}", text))


if __name__ == "__main__":
    main()
