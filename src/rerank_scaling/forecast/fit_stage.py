"""Stage: fit every law with every held-out protocol; backtests, allocation and paper tables.

    python -m rerank_scaling.forecast.fit_stage --metrics all.parquet --settings JSON --out-dir DIR \
        [--collection DIR --bm25-runs dev.trec ... --evaluation JSON]

With the collection, the BM25 runs of the fitted splits and the evaluation section, the asymptotes
of rank metrics are bounded by the reranking ceiling (:mod:`rerank_scaling.laws.ceiling`).

The fitting is ``rerank-scaling forecast``'s own core (:func:`rerank_scaling.forecast.run.forecast_metrics`),
so the workflow and a user's table of runs get the same engine. Writes into DIR: fits.parquet,
forecasts.parquet, backtests.parquet, allocation.parquet, equal_compute.parquet,
tables/<name>.{csv,md,tex} for each name in TABLES, figures/calibration.{png,pdf} (nominal vs
empirical coverage of the rolling-origin backtests), and the command's forecasts.csv (the headline
laws at the held-out sizes' final checkpoints) and answer.md
(:func:`rerank_scaling.forecast.run.write_answer`).
A group whose fit fails yields a row with status "failed" and its reason, one whose parameters are
not identified a row with status "degenerate" and its reason; the stage itself does not fail.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.forecast.run import forecast_metrics, write_answer
from rerank_scaling.laws import backtests, law_tables
from rerank_scaling.laws.allocation import allocation_table, equal_compute
from rerank_scaling.laws.ceiling import split_ceilings
from rerank_scaling.laws.fit_settings import TABLES, FitSettings
from rerank_scaling.laws.protocols import prepare
from rerank_scaling.settings import parse_json_arg, settings_from_dict, with_defaults

log = logging.getLogger(__name__)


def fit_everything(table: pd.DataFrame, settings: FitSettings, out_dir: Path, workers: int = 1) -> None:
    from rerank_scaling.laws.calibration_figure import calibration as calibration_figure  # matplotlib
    from rerank_scaling.plotting import save_figure  # only where the figure is drawn

    result = forecast_metrics(table, settings, workers)
    fits, forecasts, points, calibration = result.fits, result.every, result.backtests, result.calibration
    allocation = allocation_table(fits, forecasts, settings.step_axis) if len(fits) else pd.DataFrame()
    prepared = prepare(table, settings)
    pair = settings.equal_compute
    compared = equal_compute(prepared, *pair, settings.step_axis) if pair else pd.DataFrame()
    if len(fits):
        counts = fits["status"].value_counts().to_dict()
        log.info(
            "%d fits %s, %d forecast rows, %d backtest points", len(fits), counts, len(forecasts), len(points)
        )
    for name, frame in (
        ("fits", fits),
        ("forecasts", forecasts),
        ("backtests", points),
        ("allocation", allocation),
        ("equal_compute", compared),
    ):
        write_table(frame, out_dir / f"{name}.parquet")
    tables = law_tables.all_tables(
        fits, forecasts, allocation, compared, backtests.summary(points), calibration
    )
    assert tuple(tables) == TABLES, "law_tables.all_tables and TABLES name the same tables"
    law_tables.write_all(tables, out_dir / "tables")
    save_figure(calibration_figure(calibration), out_dir / "figures" / "calibration")
    write_answer(result, prepared, out_dir, settings.size_axis)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--settings", required=True, help="JSON of the config's fitting section")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--threads", type=int, default=1, help="groups fitted in parallel")
    parser.add_argument("--collection", help="collection directory (queries, qrels) for the ceiling")
    parser.add_argument("--bm25-runs", nargs="*", default=[], help="BM25 runs <split>.trec for the ceiling")
    parser.add_argument("--evaluation", default="{}", help="JSON of the config's evaluation section")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_dict(FitSettings, parse_json_arg(args.settings), "fitting")
    if args.collection and args.bm25_runs:
        runs = {Path(run).name.removesuffix(".trec"): run for run in args.bm25_runs}
        evaluation = with_defaults("evaluation", parse_json_arg(args.evaluation))
        ceilings = split_ceilings(args.collection, runs, evaluation)
        log.info("reranking ceilings: %s", ", ".join(f"{s} {m} {v:.3f}" for s, m, v in ceilings))
        settings = dataclasses.replace(settings, ceilings=ceilings)
    fit_everything(pd.read_parquet(args.metrics), settings, Path(args.out_dir), args.threads)


if __name__ == "__main__":
    main()
