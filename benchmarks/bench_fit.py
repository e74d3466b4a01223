"""Wall time of the fit stage (every protocol, law, bootstrap and backtest) on a table like the default's.

python benchmarks/bench_fit.py --resamples 500 --threads 2 --out benchmarks/results/fit_cpu.md

The default's metrics table is built by the workflow (results/default/metrics/all.parquet); this
benchmark generates one of the same shape instead (rerank_scaling.laws.synthetic): 4 ladder sizes
(L1-L3 fitted, L4 held out; 1.77M non-embedding parameters per MiniLM layer, 11.7M embedding),
3 objectives x 15 checkpoints x 2 metrics (nDCG@10, CE@16) x 2 splits, L1 with a second seed,
per-run offsets sd 0.004 and checkpoint noise sd 0.015 (tests/laws/test_fit_statistics.py says where these
come from). Pass --metrics PATH to time a real table instead; --config config.yaml fits it with that
config's fitting section (e.g. the default's last_k 1, dev split) and --results DIR adds the
reranking ceilings from DIR's collection and BM25 runs, as the workflow does (the model-form
ensemble is fitted on every model-protocol split either way, and the two-step forecast through
CE@16 on every nDCG@10 model split). The time is the whole stage's
(:func:`rerank_scaling.forecast.fit_stage.fit_everything`: the engine of ``rerank-scaling forecast``,
tables, figure, forecasts.csv and answer.md). Target (issues 12, 24): <= 60 s with 500 resamples
on 2 cores. On a shared machine the wall time depends on the load; the CPU time of all
processes (over 2 cores, a lower bound on a quiet machine's wall time x 2) does not.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from benchmark_output import emit

from rerank_scaling.forecast.fit_stage import fit_everything
from rerank_scaling.laws.ceiling import split_ceilings
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.synthetic import synthetic_metrics_table
from rerank_scaling.precision import cpu_name
from rerank_scaling.settings import with_defaults, written_section

LADDER = {f"L{k}": (1.77e6 * k, 1.77e6 * k + 11.7e6, "fit" if k < 4 else "held_out") for k in range(1, 5)}


def default_like_table() -> pd.DataFrame:
    return synthetic_metrics_table(
        LADDER,
        objectives=("pointwise", "pairwise", "listwise"),
        checkpoints=15,
        seeds={"L1": 2},
        run_sigma=0.004,
        checkpoint_sigma=0.015,
        truth=(0.40, 0.20, 0.6, 0.02, 0.5),
        steps=(10.0, 306.0),
    )


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its finished worker processes."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _fitting(config: str | None, results: str | None) -> tuple[dict, tuple]:
    """The config file's fitting section as written (without bootstrap/uncertainty, set here; the
    rest from FitSettings.of) and the ceilings (its evaluation section with the schema's defaults)."""
    written = yaml.safe_load(Path(config).read_text()) if config else {}
    section = written_section(written, "fitting")
    fitting = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items()}
    fitting = {k: v for k, v in fitting.items() if k not in ("bootstrap", "uncertainty")}
    ceilings: tuple = ()
    if results:
        evaluation = with_defaults("evaluation", written_section(written, "evaluation"))
        # fitted splits as the workflow reads them (rules/common.smk fitted_splits): null = every
        # evaluation split
        dataset = written_section(written, "dataset")
        splits = with_defaults("fitting", section)["splits"] or dataset["eval_splits"]
        runs = {s: str(Path(results) / "bm25" / "runs" / f"{s}.trec") for s in splits}
        ceilings = split_ceilings(str(Path(results) / "data" / "collection"), runs, evaluation)
    return fitting, ceilings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resamples", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--uncertainty", default="run", choices=["run", "iid"])
    parser.add_argument("--metrics", default=None, help="a real metrics table (default: synthetic)")
    parser.add_argument("--config", default=None, help="fit with this config's fitting section")
    parser.add_argument("--results", default=None, help="a run's results dir: reranking ceilings")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    fitting, ceilings = _fitting(args.config, args.results)
    table = pd.read_parquet(args.metrics) if args.metrics else default_like_table()
    source = args.metrics or "synthetic default-like table"
    lines = [
        f"Fit stage wall time ({source}: {len(table)} rows), {args.threads} worker processes, "
        f"uncertainty={args.uncertainty}, {platform.machine()} ({cpu_name()}), "
        f"{os.cpu_count()} CPUs visible, "
        f"fitting section: {args.config or 'FitSettings defaults'}, "
        f"ceilings: {', '.join(f'{s} {m} {v:.3f}' for s, m, v in ceilings) or 'none'}",
        "",
        "| resamples | wall s | CPU s (all processes) | load before | fits | ok | degenerate | failed "
        "| backtest points |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for resamples in args.resamples:
        settings = FitSettings.of(
            **{"metrics": ("nDCG@10", "CE@16"), **fitting},
            bootstrap=resamples,
            uncertainty=args.uncertainty,
            ceilings=ceilings,
        )
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as tmp:
            cpu_before = _cpu_seconds()
            start = time.perf_counter()
            fit_everything(table, settings, Path(tmp), args.threads)
            seconds = time.perf_counter() - start
            cpu = _cpu_seconds() - cpu_before
            fits = pd.read_parquet(Path(tmp) / "fits.parquet")
            points = pd.read_parquet(Path(tmp) / "backtests.parquet")
        counts = fits["status"].value_counts()
        lines.append(
            f"| {resamples} | {seconds:.1f} | {cpu:.1f} | {load:.1f} | {len(fits)} | {counts.get('ok', 0)} | "
            f"{counts.get('degenerate', 0)} | {counts.get('failed', 0)} | {len(points)} |"
        )
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
