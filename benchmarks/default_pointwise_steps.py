"""Pointwise levers of the embedded default: does the held-out size pass the largest fitted one,
is its forecast within that gap, and what does it cost? A table over finished runs.

Each run is the default with one overlay from ``benchmarks/configs/`` (pointwise objective only;
more negatives per query = more steps in the one epoch, a smaller batch = more steps on the same
pairs, a lower learning rate; a second seed for L1, L4 and L6), run first, then tabulated:

    snakemake --cores 2 --configfile benchmarks/configs/pointwise_negatives_4.yaml
    python benchmarks/default_pointwise_steps.py benchmarks/configs/pointwise_*.yaml \\
        --out benchmarks/results/default_pointwise_steps.md

Per overlay it reads the run folder ``results/<run_name>`` (``--results``): ``metrics/all.parquet``
and ``metrics/per_query.parquet`` (final dev nDCG@10 and its standard error over queries),
``laws/`` (the held-out check of summary.md, the same function) and Snakemake's
``benchmarks/train/<run>.tsv`` (training CPU time of the first seed's pointwise runs).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pandas as pd
import yaml
from benchmark_output import emit_table, overlay_run_arguments

from rerank_scaling.report.held_out_check import run_check
from rerank_scaling.report.scaling_evidence import final_rows
from rerank_scaling.settings import written_section
from rerank_scaling.workflow.timing import job_times

OBJECTIVE, SPLIT, METRIC = "pointwise", "dev", "nDCG@10"


def _finals(metrics: pd.DataFrame, split: str) -> pd.DataFrame:
    """Final nDCG@10 of every pointwise run on ``split``: model, seed, step, examples, value."""
    return final_rows(
        metrics[
            (metrics["metric"] == METRIC) & (metrics["objective"] == OBJECTIVE) & (metrics["split"] == split)
        ]
    )


def _by_seed(finals: pd.DataFrame, model: str) -> str:
    values = finals.loc[finals["model"] == model].sort_values("seed")
    return " / ".join(f"{v:.3f}" for v in values["value"])


def levers(overlay: dict) -> str:
    """The overlay's pointwise levers, as written in it."""
    examples, training = written_section(overlay, "examples"), written_section(overlay, "training")
    parts = [
        f"negatives {examples['pointwise_negatives']}" if "pointwise_negatives" in examples else "",
        f"batch {training['pointwise_batch_size']}" if "pointwise_batch_size" in training else "",
        f"lr {training['lr']:g}" if "lr" in training else "",
    ]
    return ", ".join(part for part in parts if part)


def run_row(overlay_path: Path, results: Path) -> dict[str, object]:
    """One table row: the overlay's levers and steps, the two largest sizes' finals per seed, the
    joint law's held-out check, and the training CPU time."""
    overlay = yaml.safe_load(overlay_path.read_text())
    run_dir = results / overlay["run_name"]
    metrics = pd.read_parquet(run_dir / "metrics" / "all.parquet")
    per_query = pd.read_parquet(run_dir / "metrics" / "per_query.parquet")
    check, joint = run_check(run_dir / "laws", metrics, per_query, METRIC)
    if not check.empty:
        wanted = (check["objective"] == OBJECTIVE) & (check["split"] == SPLIT) & (check["protocol"] == joint)
        check = check[wanted]
    if check.empty:
        raise SystemExit(f"{run_dir}: no held-out check for {OBJECTIVE} on {SPLIT} (no held-out size?)")
    r = check.iloc[0]
    variant = metrics[metrics["attention"] == r.attention]
    dev, test = _finals(variant, SPLIT), _finals(variant, "test")
    first_seed = dev.groupby("model")["seed"].transform("min") == dev["seed"]
    runs = set(dev.loc[first_seed, "run"])
    cpu = {t.job: t.cpu_s for t in job_times(run_dir) if t.stage == "train" and t.job in runs}
    return {
        "overlay": overlay_path.stem,
        "levers": levers(overlay),
        "steps": int(dev["step"].max()),
        "pairs": int(dev["examples"].max()),
        "largest fitted": f"{r.largest_fitted} {_by_seed(dev, r.largest_fitted)}",
        "held out": f"{r.held_out} {_by_seed(dev, r.held_out)}",
        "gap (mean)": f"{r.gap:+.3f}",
        "paired SE of the gap": f"{r.gap_se:.3f}",
        f"{joint} forecast [95%]": f"{r.forecast:.3f} [{r.low:.3f}, {r.high:.3f}]",
        "miss": f"{r.miss:.3f}",
        "miss < gap": "yes" if r.miss_within_gap else "no",
        "covered": "yes" if r.covered else "no",
        "test: fitted / held out": f"{_by_seed(test, r.largest_fitted)} / {_by_seed(test, r.held_out)}",
        "training CPU-min, one seed per size": f"{sum(cpu.values()) / 60:.1f}",
        f"of which {r.held_out}": f"{max(cpu.values()) / 60:.1f}",
    }


def main() -> None:
    args = overlay_run_arguments(__doc__)
    table = pd.DataFrame([run_row(overlay, args.results) for overlay in args.overlays])
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    emit_table(
        f"Pointwise levers of the embedded default: held-out {SPLIT} {METRIC} at the final checkpoint",
        [
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs; load average when tabulated {load} "
            "(the CPU times come from each run's Snakemake benchmark files, two 1-thread jobs side by side; "
            "some runs shared the machine with test runs, so their CPU times carry that load).",
            "Values per seed (`a / b`); gap = held-out mean - largest fitted mean (miss < gap needs a "
            "positive gap); SE: the larger of the two sizes' standard errors over queries.",
        ],
        table,
        args.out,
    )


if __name__ == "__main__":
    main()
