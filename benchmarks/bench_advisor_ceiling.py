"""How far any plan-choosing rule could beat "the largest affordable size" in the advisor's simulation,
even knowing the true law: the ceiling the advisor (:mod:`rerank_scaling.forecast.advise_plan`) is
judged under in ``benchmarks/bench_advisor.py``.

    python benchmarks/bench_advisor_ceiling.py --ladders 200 --seed 11 --bootstrap 20 --draws 8 \
        --rows plans.csv --out benchmarks/results/advisor_ceiling.md

The ladders are the simulation's (:func:`bench_advisor.ladder_setup`: the same seed gives the same
true laws, starting runs, prices and budgets). Every maximal affordable plan of a ladder (what the
advisor and both baselines choose among: each buys while a run is affordable) is run ``--draws``
times, each run's outcome drawn afresh from the truth, and the target's ensemble is fitted as the
simulation fits it (``--bootstrap`` resamples); the 95% interval's width, the point forecast's
|error| to the true mean and the interval score are read (:func:`bench_advisor.scored`).

An *oracle* knows each plan's expected values under the truth, which no real rule does (a rule sees
four noisy runs, not the law); it does not know the outcomes the plan will get. Each oracle below
chooses its plan on the first half of the draws and is scored on the other half: choosing and
scoring on the same draws would credit it with the luck it chose on (the winner's curse). Its value
over the largest-affordable rule's, on the same scoring draws, is a ratio of means over ladders
with a paired bootstrap 95% interval (:func:`bench_advisor.ratio_interval`). The oracles choose on
finitely many draws; the last table shows how little choosing on more of them changes.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from bench_advisor import (
    CANDIDATES,
    TARGET,
    group_of,
    ladder_setup,
    largest_first,
    ratio_interval,
    scored,
    target_forecast,
)
from benchmark_output import commit, emit

from rerank_scaling.forecast.advise_plan import affordable_plans
from rerank_scaling.precision import cpu_name

QUANTITIES = ("width", "error", "score")


def plan_rows(args: tuple[int, int, int, int]) -> list[dict]:
    """One row per (maximal affordable plan, draw) of ladder ``index``: its realised width, |error|
    and interval score at the target."""
    index, seed, bootstrap, draws = args
    setup, _ = ladder_setup(index, seed)
    largest = tuple(sorted(largest_first([c.cost for c in setup.candidates], setup.budget)))
    rows = []
    for plan in affordable_plans(setup.candidates, setup.budget):
        bought = tuple(sorted(plan))
        for draw in range(draws):
            rng = np.random.default_rng([seed, index, 77, draw])  # outcomes apart from the ladder's
            added = [(CANDIDATES[i][0], setup.truth.run(CANDIDATES[i][0], rng), 1) for i in bought]
            points = setup.start + added
            forecast = target_forecast(group_of(points, bootstrap, setup.truth.ceiling), TARGET, index)
            width, error, score = scored(forecast, setup.truth.mean(TARGET))
            rows.append(
                {"ladder": index, "kind": setup.kind, "plan": "+".join(map(str, bought)),
                 "largest": bought == largest, "draw": draw, "width": width, "error": error, "score": score}
            )  # fmt: skip
    return rows


def ratio_to_largest(means: pd.DataFrame) -> pd.DataFrame:
    """Each plan's expected width, |error| and score over the largest-affordable plan's, per ladder."""
    largest = means[means["largest"]].set_index("ladder")[list(QUANTITIES)]
    return means[list(QUANTITIES)] / largest.loc[means["ladder"]].to_numpy()


def column(quantity: str) -> Callable[[pd.DataFrame], pd.Series]:
    """The oracle that minimises one quantity's ratio."""
    return lambda ratios: ratios[quantity]


def by_both(ratios: pd.DataFrame) -> pd.Series:
    """The sum of the width and |error| ratios, among plans expected to lower neither quantity less
    than the largest-affordable plan (it is always among them)."""
    total = ratios["width"] + ratios["error"]
    return total.where((ratios["width"] <= 1) & (ratios["error"] <= 1), np.inf)


#: Oracle name -> what it minimises over a ladder's plans (the plans' expected values on the
#: choosing draws, as ratios to the largest-affordable plan's).
ORACLES: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "the narrowest expected interval": column("width"),
    "the smallest expected |error|": column("error"),
    "the smallest expected interval score": column("score"),
    "the smallest width + |error| ratio sum, neither worse than the largest's": by_both,
}


def oracle_values(rows: pd.DataFrame, draws: int, choosing: int | None = None) -> pd.DataFrame:
    """Per ladder: the largest-affordable plan's and each oracle's plan's scoring-half means, and
    whether the oracle chose another plan; the oracles choose on the first ``choosing`` draws (all
    of the choosing half by default)."""
    choosing = draws // 2 if choosing is None else min(choosing, draws // 2)
    choose = rows[rows["draw"] < choosing].groupby(["ladder", "plan", "largest"], as_index=False)
    score = rows[rows["draw"] >= draws // 2].groupby(["ladder", "plan"])[list(QUANTITIES)].mean()
    chosen_means = choose[list(QUANTITIES)].mean()
    ratios = ratio_to_largest(chosen_means)
    found = []
    for ladder, plans in chosen_means.groupby("ladder"):
        largest = plans.loc[plans["largest"], "plan"].iloc[0]
        row = {"ladder": ladder, **{f"{q} largest": score.loc[(ladder, largest), q] for q in QUANTITIES}}
        row["choice"] = len(plans) > 1
        for name, criterion in ORACLES.items():
            values = criterion(ratios.loc[plans.index]).fillna(np.inf)
            plan = plans.loc[values.idxmin(), "plan"] if np.isfinite(values).any() else largest
            row.update({f"{q} {name}": score.loc[(ladder, plan), q] for q in QUANTITIES})
            row[f"other {name}"] = plan != largest
        found.append(row)
    return pd.DataFrame(found)


def intervals(values: pd.DataFrame, rng: np.random.Generator) -> dict[tuple[str, str], tuple[float, ...]]:
    """(oracle, quantity) -> its ratio to the largest rule's with the 95% interval."""
    return {
        (name, q): ratio_interval(
            values[f"{q} {name}"].to_numpy(float), values[f"{q} largest"].to_numpy(float), rng
        )
        for name in ORACLES
        for q in QUANTITIES
    }


def report_table(values: pd.DataFrame, found: dict[tuple[str, str], tuple[float, ...]]) -> list[str]:
    lines = [
        "| oracle: the plan with | width / largest [95% CI] | abs error / largest [95% CI] | "
        "interval score / largest [95% CI] | ladders where it chose another plan |",
        "|---|---|---|---|---|",
    ]
    for name in ORACLES:
        cells = ["{:.3f} [{:.3f}, {:.3f}]".format(*found[name, q]) for q in QUANTITIES]
        other = int(values[f"other {name}"].sum())
        lines.append(f"| {name} | {' | '.join(cells)} | {other} of {len(values)} |")
    return lines


def beats_both(found: dict[tuple[str, str], tuple[float, ...]]) -> list[str]:
    """The oracles whose width and |error| intervals (as :func:`intervals` found them) both lie below 1."""
    return [name for name in ORACLES if max(found[name, "width"][2], found[name, "error"][2]) < 1]


def saturation_table(rows: pd.DataFrame, draws: int) -> list[str]:
    """Each oracle's width and |error| ratios when it chooses on 1, 2, ... of the choosing draws
    (scored on the same scoring half): where more draws buy little, the oracle is near the best
    any rule knowing the law could choose."""
    counts = range(1, draws // 2 + 1)
    lines = [
        "| oracle: the plan with | " + " | ".join(f"choosing on {k}" for k in counts) + " |",
        "|---|" + "---|" * len(counts),
    ]
    found = {k: oracle_values(rows, draws, k) for k in counts}
    for name in ORACLES:
        cells = []
        for k in counts:
            values = found[k]
            width = values[f"width {name}"].mean() / values["width largest"].mean()
            error = values[f"error {name}"].mean() / values["error largest"].mean()
            cells.append(f"{width:.3f} / {error:.3f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def report(rows: pd.DataFrame, args: argparse.Namespace) -> str:
    values = oracle_values(rows, args.draws)
    rng = np.random.default_rng(args.seed)
    plans = rows.groupby("ladder")["plan"].nunique()
    choice = values[values["choice"]]
    found = intervals(values, rng)
    winners = beats_both(found)  # read off the table shown, not a second bootstrap
    verdict = (
        f"Oracles that lower both the width and the |error| (both intervals below 1): {', '.join(winners)}."
        if winners
        else "No oracle lowers both the width and the |error| (both intervals below 1): choosing among "
        "these plans trades one for the other, even knowing the true law."
    )
    return "\n".join(
        [
            "# The advisor's ceiling: what knowing the true law would buy",
            "",
            f"`python benchmarks/bench_advisor_ceiling.py --ladders {args.ladders} --seed {args.seed} "
            f"--bootstrap {args.bootstrap} --draws {args.draws}` at commit {commit()}, on {cpu_name()} "
            f"({os.cpu_count()} CPUs). The ladders of `bench_advisor.py --seed {args.seed}` "
            f"(benchmarks/results/advisor.md's simulation when the seeds agree): {len(plans)} ladders, "
            f"{int(plans.sum())} maximal affordable plans, each run {args.draws} times from the truth "
            f"({len(rows)} fits, {args.bootstrap} resamples each); oracles choose on draws "
            f"0-{args.draws // 2 - 1} and are scored on draws {args.draws // 2}-{args.draws - 1} "
            "(module docstring).",
            "",
            f"All {len(values)} ladders:",
            "",
            *report_table(values, found),
            "",
            f"The {len(choice)} ladders with more than one maximal affordable plan:",
            "",
            *(report_table(choice, intervals(choice, rng)) if len(choice) else ["(none)"]),
            "",
            verdict,
            "",
            "How the oracles' width / |error| ratios (to the largest rule's, all ladders) change with "
            "the number of draws they choose on, scored on the same scoring draws: where more draws "
            "buy little, more knowledge of each plan's expected values would buy little more.",
            "",
            *saturation_table(rows, args.draws),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ladders", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11, help="the simulation's ladder seed")
    parser.add_argument("--bootstrap", type=int, default=20, help="resamples per fit (the simulation's)")
    parser.add_argument(
        "--draws", type=int, default=8, help="outcome draws per plan: half choose, half score"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows", type=Path, help="the per-plan rows: read if there, else written")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    if args.rows and args.rows.exists():
        rows = pd.read_csv(args.rows, dtype={"plan": str})
    else:
        jobs = [(i, args.seed, args.bootstrap, args.draws) for i in range(args.ladders)]
        with ProcessPoolExecutor(args.workers) as pool:
            rows = pd.DataFrame([row for part in pool.map(plan_rows, jobs) for row in part])
        if args.rows:
            rows.to_csv(args.rows, index=False)
    emit(report(rows, args), args.out)


if __name__ == "__main__":
    main()
