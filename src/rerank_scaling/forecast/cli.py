"""``rerank-scaling forecast RUNS.csv --out DIR``: the forecasting engine on a user's table of runs.

Exit status 2 with one line naming the file, column or line and the fix when the table cannot be
forecast from (:class:`~rerank_scaling.forecast.table.TableError`).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rerank_scaling.forecast.run import forecast_runs
from rerank_scaling.forecast.table import REQUIRED, TableError
from rerank_scaling.records import MetricSpec


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rerank-scaling", description="Forecast how rerankers scale.")
    commands = top.add_subparsers(dest="command", required=True)
    forecast = commands.add_parser(
        "forecast",
        help="forecast held-out and target sizes from a table of runs",
        description=f"Columns: {', '.join(REQUIRED)} required; step or tokens, seed, metric, split, "
        "objective, role (fit/held_out; default: the largest size held out) optional.",
    )
    forecast.add_argument("runs", type=Path, help="CSV or Parquet table of runs")
    forecast.add_argument("--out", type=Path, required=True, help="folder for forecasts.csv, fits.csv, ...")
    forecast.add_argument("--target-size", type=float, action="append", default=[], help="forecast this size")
    forecast.add_argument("--run-sigma", type=float, help="run-to-run sd of a final value, if known")
    forecast.add_argument("--metric", help="the metric's name when the table has no metric column")
    forecast.add_argument("--lower-is-better", action="store_true", help="the metric is a loss")
    forecast.add_argument("--range", type=float, nargs=2, metavar=("LO", "HI"), help="the metric's range")
    forecast.add_argument("--bootstrap", type=int, default=500, help="run-bootstrap resamples per law")
    forecast.add_argument("--seed", type=int, default=0)
    return top


def declared_metric(args: argparse.Namespace) -> MetricSpec | None:
    """The metric the options declare (None: the table's names are known metrics)."""
    if not (args.metric or args.lower_is_better or args.range):
        return None
    low, high = args.range or (0.0, math.inf if args.lower_is_better else 1.0)
    return MetricSpec(args.metric or "value", -1 if args.lower_is_better else 1, (low, high))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        result = forecast_runs(
            args.runs,
            args.out,
            tuple(args.target_size),
            args.run_sigma,
            declared_metric(args),
            args.bootstrap,
            args.seed,
        )
    except TableError as error:
        print(f"rerank-scaling forecast: {error}", file=sys.stderr)
        return 2
    print((args.out / "answer.md").read_text())
    print(
        f"wrote {args.out}/forecasts.csv ({len(result.forecasts)} rows), fits.csv, calibration.csv, answer.md"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
