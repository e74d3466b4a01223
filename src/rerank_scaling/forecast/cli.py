"""``rerank-scaling forecast RUNS.csv --out DIR``: the forecasting engine on a user's table of runs;
``rerank-scaling advise RUNS.csv --target SIZE --out DIR``: which run to train next
(:mod:`.advise_table`).

Exit status 2 with one line naming the file, column or line and the fix when the table cannot be
forecast from (:class:`~rerank_scaling.forecast.table.TableError`).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rerank_scaling.forecast.advise import OUTCOMES
from rerank_scaling.forecast.advise_table import advise_runs, write_advice
from rerank_scaling.forecast.run import forecast_runs
from rerank_scaling.forecast.table import REQUIRED, TableError, known_metric
from rerank_scaling.registries.measures import MetricSpec, metric_spec
from rerank_scaling.report.answer_advice import next_sentence, plan_sentence


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
    metric_options(forecast)
    advise = commands.add_parser(
        "advise",
        help="rank candidate runs by how much each shrinks the target forecast's interval per unit cost",
        description="The same table of runs as forecast (every run fitted). Candidates: columns "
        "model, size, cost; steps, seed optional. Without --candidates: the table's sizes again and "
        "the geometric midpoints between them and to the target, priced size x steps.",
    )
    advise.add_argument("runs", type=Path, help="CSV or Parquet table of runs")
    advise.add_argument("--target", type=float, required=True, help="the size whose forecast matters")
    advise.add_argument("--candidates", type=Path, help="CSV of candidate runs (model, size, cost)")
    advise.add_argument("--out", type=Path, required=True, help="folder for advice.csv")
    advise.add_argument("--outcomes", type=int, default=OUTCOMES, help="simulated outcomes per candidate")
    advise.add_argument(
        "--budget", type=float, help="what may be spent (the candidates' cost unit): also plans.csv, the "
        "affordable sets of runs, best first, and advice.csv's best-plan runs first",
    )  # fmt: skip
    metric_options(advise)
    return top


def metric_options(command: argparse.ArgumentParser) -> None:
    """The options every command reading a table of runs shares: noise, metric, resamples, seed."""
    command.add_argument("--run-sigma", type=float, help="run-to-run sd of a final value, if known")
    command.add_argument("--metric", help="the metric's name when the table has no metric column")
    direction = command.add_mutually_exclusive_group()
    direction.add_argument("--lower-is-better", action="store_true", help="the metric is a loss")
    direction.add_argument("--higher-is-better", action="store_true", help="the metric is a score")
    command.add_argument("--range", type=float, nargs=2, metavar=("LO", "HI"), help="the metric's range")
    command.add_argument(
        "--bootstrap", type=int, help="run-bootstrap resamples per law (default: fitting.bootstrap's)"
    )
    command.add_argument("--seed", type=int, default=0)


class OptionError(ValueError):
    """An option's value cannot be used; the message names the option and the fix."""


def check_options(args: argparse.Namespace, targets: list[float], target_option: str) -> None:
    """Every option's value checked before the table is read (:class:`OptionError`); the target
    sizes are ``target_option``'s."""
    for size in targets:
        if not (math.isfinite(size) and size > 0):
            raise OptionError(
                f"{target_option} {size:g}: a size is a positive parameter count; give e.g. 1e9"
            )
    if args.bootstrap is not None and args.bootstrap < 1:
        raise OptionError(
            f"--bootstrap {args.bootstrap}: give a positive number of resamples (or leave it out for "
            "fitting.bootstrap's default)"
        )
    if args.run_sigma is not None and not (math.isfinite(args.run_sigma) and args.run_sigma >= 0):
        raise OptionError(
            f"--run-sigma {args.run_sigma:g}: a standard deviation is 0 or more; give the sd of a final "
            "value across reruns of one size, or leave the option out"
        )
    if args.range and not (math.isfinite(args.range[0]) and args.range[0] < args.range[1]):
        low, high = args.range
        raise OptionError(f"--range {low:g} {high:g}: LO must be finite and below HI (e.g. --range 0 1)")


def declared_metric(args: argparse.Namespace) -> MetricSpec | None:
    """The metric the options declare (None: the table's names are known metrics); a known name
    keeps what the options leave open (its direction, its range), an unknown one needs its direction
    (:func:`rerank_scaling.forecast.run.forecast_runs` says so)."""
    if not (args.metric or args.lower_is_better or args.higher_is_better or args.range):
        return None
    name = args.metric or "value"
    if args.lower_is_better or args.higher_is_better:
        direction = -1 if args.lower_is_better else 1
    elif known_metric(name):
        direction = metric_spec(name).direction
    else:
        direction = 0  # undeclared: forecast_runs names the options to give
    default = metric_spec(name).range if known_metric(name) else (0.0, math.inf if direction < 0 else 1.0)
    low, high = args.range or default
    return MetricSpec(name, direction, (low, high))


def run_advise(args: argparse.Namespace) -> int:
    """``rerank-scaling advise``: advice.csv and its first sentence."""
    try:
        check_options(args, [args.target], "--target")
        if args.outcomes < 1:
            raise OptionError(
                f"--outcomes {args.outcomes}: give a positive number of simulated outcomes (e.g. 8)"
            )
        advice, plans = advise_runs(
            args.runs, args.target, args.candidates, args.run_sigma, declared_metric(args), args.bootstrap,
            args.seed, args.outcomes, args.budget,
        )  # fmt: skip
    except (TableError, OptionError) as error:
        print(f"rerank-scaling advise: {error}", file=sys.stderr)
        return 2
    written = write_advice(advice, args.out, plans)
    print(next_sentence(advice))
    if args.budget is not None:
        print(plan_sentence(plans, args.budget))
    print(f"wrote {written} ({len(advice)} candidates, best first)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "advise":
        return run_advise(args)
    try:
        check_options(args, args.target_size, "--target-size")
        result = forecast_runs(
            args.runs,
            args.out,
            tuple(args.target_size),
            args.run_sigma,
            declared_metric(args),
            args.bootstrap,
            args.seed,
        )
    except (TableError, OptionError) as error:
        print(f"rerank-scaling forecast: {error}", file=sys.stderr)
        return 2
    print((args.out / "answer.md").read_text())
    print(
        f"wrote {args.out}/forecasts.csv ({len(result.forecasts)} rows), fits.csv, calibration.csv, answer.md"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
