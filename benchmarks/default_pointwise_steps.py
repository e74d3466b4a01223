"""How many pointwise steps the embedded default needs for the held-out size to pass the largest
fitted one, and what they cost: a table over finished runs of the default's pointwise grid.

Each run is the default with one overlay from ``benchmarks/configs/`` (pointwise objective only;
more negatives per query = more steps in the one epoch; or a second seed for the two largest sizes):

    snakemake --cores 2 --configfile benchmarks/configs/pointwise_negatives_4.yaml
    python benchmarks/default_pointwise_steps.py results/exp-pw-seeds results/exp-pw-neg3 \\
        results/exp-pw-neg4 --out benchmarks/results/default_pointwise_steps.md

Per run it reads ``metrics/all.parquet`` and ``metrics/per_query.parquet`` (final dev nDCG@10 and
its standard error over queries), ``laws/`` (the held-out check of summary.md, the same function)
and Snakemake's ``benchmarks/train/<run>.tsv`` (training CPU time of the first seed's pointwise runs).
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import pandas as pd
from benchmark_output import emit

from rerank_scaling.report.held_out_check import run_check
from rerank_scaling.report.scaling_evidence import final_standard_errors

OBJECTIVE, SPLIT, METRIC = "pointwise", "dev", "nDCG@10"


def _finals(metrics: pd.DataFrame, split: str) -> pd.DataFrame:
    """Final nDCG@10 of every pointwise run on ``split``: model, seed, step, examples, value."""
    rows = metrics[
        (metrics["metric"] == METRIC) & (metrics["objective"] == OBJECTIVE) & (metrics["split"] == split)
    ]
    return rows[rows["step"] == rows.groupby("run")["step"].transform("max")]


def _by_seed(finals: pd.DataFrame, model: str) -> str:
    values = finals.loc[finals["model"] == model].sort_values("seed")
    return " / ".join(f"{v:.3f}" for v in values["value"])


def run_row(run_dir: Path) -> dict[str, object]:
    """One table row: steps, the two largest sizes' finals per seed, the joint law's held-out check."""
    metrics = pd.read_parquet(run_dir / "metrics" / "all.parquet")
    per_query = pd.read_parquet(run_dir / "metrics" / "per_query.parquet")
    check, joint = run_check(run_dir / "laws", metrics, final_standard_errors(metrics, per_query, METRIC))
    if not check.empty:
        wanted = (check["objective"] == OBJECTIVE) & (check["split"] == SPLIT) & (check["protocol"] == joint)
        check = check[wanted]
    if check.empty:
        raise SystemExit(f"{run_dir}: no held-out check for {OBJECTIVE} on {SPLIT} (no held-out size?)")
    r = check.iloc[0]
    variant = metrics[metrics["attention"] == r.attention]
    dev, test = _finals(variant, SPLIT), _finals(variant, "test")
    first_seed = dev.groupby("model")["seed"].transform("min") == dev["seed"]
    cpu = {
        run: float(pd.read_csv(run_dir / "benchmarks" / "train" / f"{run}.tsv", sep="\t")["cpu_time"].iloc[0])
        for run in dev.loc[first_seed, "run"]
    }
    return {
        "run": run_dir.name,
        "steps": int(dev["step"].max()),
        "pairs": int(dev["examples"].max()),
        "largest fitted": f"{r.largest_fitted} {_by_seed(dev, r.largest_fitted)}",
        "held out": f"{r.held_out} {_by_seed(dev, r.held_out)}",
        "gap (mean)": f"{r.gap:+.3f}",
        "SE": f"{r.se:.3f}",
        f"{joint} forecast [95%]": f"{r.forecast:.3f} [{r.low:.3f}, {r.high:.3f}]",
        "miss": f"{r.miss:.3f}",
        "miss < gap": "yes" if r.miss < r.gap else "no",
        "covered": "yes" if r.covered else "no",
        "test: fitted / held out": f"{_by_seed(test, r.largest_fitted)} / {_by_seed(test, r.held_out)}",
        "training CPU-min, one seed per size": f"{sum(cpu.values()) / 60:.1f}",
        f"of which {r.held_out}": f"{max(cpu.values()) / 60:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders (results/<run_name>)")
    parser.add_argument("--out", help="also write the Markdown report here")
    args = parser.parse_args()
    table = pd.DataFrame([run_row(run) for run in args.runs])
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    text = "\n".join(
        [
            f"# Pointwise steps in the embedded default: held-out {SPLIT} {METRIC} at the final checkpoint",
            "",
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs; load average when tabulated {load} "
            "(the CPU times come from each run's Snakemake benchmark files, two 1-thread jobs side by side).",
            "Values per seed (`a / b`); gap = held-out mean - largest fitted mean (miss < gap needs a "
            "positive gap); SE: the larger of the two sizes' standard errors over queries.",
            "",
            table.to_markdown(index=False),
            "",
        ]
    )
    emit(text, args.out)


if __name__ == "__main__":
    main()
