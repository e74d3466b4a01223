"""Is the fit stage's resample count a numerical shortcut that moves its answer? The Monte Carlo
error of the headline forecast's 95% interval, against the forecast's own standard error.

    python benchmarks/bench_interval_mc.py results/default --out benchmarks/results/interval_mc.md

The fit stage's interval (:func:`rerank_scaling.forecast.advise.ensemble_at`, the ensemble's
draws with the discrepancy term, as ``fit_laws`` forms them) is a percentile interval of B
resamples: another ``fitting.seed`` moves its endpoints. For each objective's headline group of a
finished run (the first of ``fitting.metrics``, the first fitted split, the largest held-out size)
and each B, it refits with ``--seeds`` seeds and reports the sd of each endpoint over the seeds
against the forecast's standard error (the interval's median width / (2 x 1.96)). The project's
bar for a numerical shortcut: a change below a quarter of the quantity's own standard error is not
a change, so a B whose endpoints move by more than 0.25 SE between seeds is too few.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from benchmark_output import REPO, commit, emit

from rerank_scaling.forecast.advise import ensemble_at
from rerank_scaling.forecast.advise_stage import headline_group
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.precision import cpu_name
from rerank_scaling.settings import settings_from_dict

#: The bar: an endpoint's Monte Carlo sd at most this many of the forecast's standard errors.
BAR = 0.25


def one(job: tuple[Path, Path, str, int, int]) -> dict:
    """The headline interval of ``objective`` with ``bootstrap`` resamples over ``seeds`` seeds."""
    results, config, objective, bootstrap, seeds = job
    fitting = yaml.safe_load(config.read_text())["fitting"]
    settings = replace(settings_from_dict(FitSettings, fitting, "fitting"), bootstrap=bootstrap)
    metrics, fits = (pd.read_parquet(results / name) for name in ("metrics/all.parquet", "laws/fits.parquet"))
    headline = headline_group(metrics, fits, settings, (settings.splits or ["dev"])[0], objective)
    group = headline.group
    target = group.held([("target", headline.target_size)])
    started = time.process_time()
    found = [ensemble_at(group, group.fit_rows, target, seed) for seed in range(seeds)]
    cpu = (time.process_time() - started) / seeds
    low, high = (np.array([getattr(f, side) for f in found]) for side in ("low", "high"))
    se = float(np.median(high - low)) / (2 * 1.96)
    return {
        "objective": objective, "target": headline.target,
        "bootstrap": bootstrap, "low": low.mean(), "high": high.mean(), "se": se,
        "low_sd": low.std(ddof=1) / se, "high_sd": high.std(ddof=1) / se, "cpu_s": cpu,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a finished run's results folder (results/default)")
    parser.add_argument("--config", type=Path, default=REPO / "config.yaml", help="its config file")
    parser.add_argument("--bootstrap", type=int, nargs="+", default=[100, 200, 500])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()
    objectives = yaml.safe_load(args.config.read_text())["training"]["objectives"]
    jobs = [(args.results, args.config, o, b, args.seeds) for o in objectives for b in args.bootstrap]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = pd.DataFrame(list(pool.map(one, jobs)))
    worst = rows.assign(worst=rows[["low_sd", "high_sd"]].max(axis=1)).groupby("bootstrap")["worst"].max()
    lines = [
        "# Monte Carlo error of the headline forecast's interval, against its standard error",
        "",
        f"`python benchmarks/bench_interval_mc.py {args.results} --config {args.config} --seeds "
        f"{args.seeds}` at commit {commit()}, on {cpu_name()} ({os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.1f} at the end). Each objective's headline forecast (nDCG@10 of the "
        f"first fitted split at the largest held-out size) refitted as `fit_laws` fits it with "
        f"{args.seeds} seeds per resample count B. sd/SE: an endpoint's sd over the seeds in units of "
        f"the forecast's standard error (median width / 3.92); the bar is {BAR}.",
        "",
        "| objective | target | B | interval (mean of seeds) | SE | low sd/SE | high sd/SE | CPU s per fit |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows.itertuples():
        lines.append(
            f"| {r.objective} | {r.target} | {r.bootstrap} | [{r.low:.3f}, {r.high:.3f}] | {r.se:.4f} "
            f"| {r.low_sd:.2f} | {r.high_sd:.2f} | {r.cpu_s:.2f} |"
        )
    lines += ["", "| B | largest endpoint sd/SE over the objectives | within the bar |", "|---:|---:|---|"]
    lines += [f"| {b} | {w:.2f} | {'yes' if w <= BAR else 'no'} |" for b, w in worst.items()]
    emit("\n".join([*lines, ""]), args.out)


if __name__ == "__main__":
    main()
