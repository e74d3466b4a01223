"""Score the frozen forecasting method once on a ladder it has never seen: Epoch AI's Chinchilla data.

    python benchmarks/fresh_ladders.py --tag TAG --out benchmarks/results/fresh_ladders.md

Data: ``../shared/data/ladders/chinchilla_epoch/svg_extracted_data.csv`` (Epoch AI's digitised
points of the Chinchilla paper, Hoffmann et al. 2022: model size N, training FLOP C, loss; tokens
D = C / (6 N)); the 5 highest-loss points are left out, as Epoch's own fit leaves them out. The
units were fixed before any forecast of this data was made or any loss value was read (only the
header, the README and the spread of the FLOP column, log10 C from 18.1 to 22.1, continuous):

* **frontier (a law in compute)**: FLOP budgets are half-decade bins of C (edges 10^(k/2)); a bin
  with at least :data:`MIN_POINTS` points is a budget, its lowest loss the compute-optimal frontier
  point (at that point's own C). The engine's size axis is C. Rolling origins: fit the j smallest
  budgets and forecast the next, for every j from :data:`MIN_BUDGETS` (the engine's model-form
  ensemble; the seed paper's single power law with an i.i.d. bootstrap; the log-linear reference).
  Digitised C is continuous, so rounding it (an earlier draft's "two significant digits") makes
  nearly every point its own budget and the minimum of one point is no frontier.
* **(N, D) surface**: every point a run (its model and size: N at two significant digits), the additive
  joint law in (N, D) fitted to every point below the largest budget and forecasting the points
  from the largest budget up (the engine: run bootstrap; the seed paper: i.i.d. bootstrap; the
  log-linear reference in ln N and ln D). An observation the frontier also holds out is counted
  once, as the frontier's.

Scores (:mod:`ladder_scores`, the same as benchmarks/results/ladders.md): coverage at 95% and 80%
with exact (Clopper-Pearson) intervals, the interval score at alpha 0.05 and 0.2 divided by the
slice's spread of fitted values, the engine's skill against the two references, how many forecasts
the engine labelled usable and how many of those missed.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_ladders import LADDERS, LOSS, Unit, forecast_unit
from benchmark_output import commit, emit
from ladder_scores import LEVELS, REFERENCES, honest_points, method_table, skill

from rerank_scaling.precision import cpu_name
from rerank_scaling.registries.measures import MetricSpec

METRIC = MetricSpec("chinchilla_loss", -1, LOSS)
#: Budgets a frontier fit needs at least (a three-parameter law and a residual).
MIN_BUDGETS = 4
#: Points a FLOP bin needs to be a budget whose lowest loss is a frontier point.
MIN_POINTS = 3
#: Budgets per decade of C (half-decade bins).
BINS_PER_DECADE = 2


def chinchilla(root: Path) -> pd.DataFrame:
    """(N, C, D, budget, loss) of every digitised point but the 5 highest losses; ``budget``: the
    lower edge of the point's half-decade bin of C."""
    table = pd.read_csv(root / "chinchilla_epoch" / "svg_extracted_data.csv")
    table = table.sort_values("loss").iloc[: len(table) - 5]
    n, c = table["Model Size"].astype(float), table["Training FLOP"].astype(float)
    budget = 10.0 ** (np.floor(np.log10(c) * BINS_PER_DECADE) / BINS_PER_DECADE)
    return pd.DataFrame({"N": n, "C": c, "D": c / (6 * n), "budget": budget, "loss": table["loss"]})


def budgets(points: pd.DataFrame) -> pd.Index:
    """The bins holding at least :data:`MIN_POINTS` points, in increasing C."""
    counts = points["budget"].value_counts()
    return counts[counts >= MIN_POINTS].index.sort_values()


def name(value: float, prefix: str) -> str:
    """A run's name without "+" (the engine joins fitted model names with "+" in its backtests)."""
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{prefix}{mantissa}E{int(exponent)}"


def frontier_units(points: pd.DataFrame) -> list[Unit]:
    """One unit per rolling origin of the compute-optimal frontier (module docstring)."""
    kept = points[points["budget"].isin(budgets(points))]
    best = kept.loc[kept.groupby("budget")["loss"].idxmin()].sort_values("budget")
    runs = pd.DataFrame(
        {
            "model": [name(c, "C") for c in best["C"]],
            "size": best["C"].to_numpy(),
            "value": best["loss"].to_numpy(),
        }
    )
    units = []
    for j in range(MIN_BUDGETS, len(runs)):
        part = runs.iloc[: j + 1].assign(role=["fit"] * j + ["held_out"])
        units.append(Unit("chinchilla", f"frontier, {j} budgets", METRIC, part))
    return units


def surface_unit(points: pd.DataFrame) -> Unit:
    """The additive law in (N, D): a model per N at two significant digits (its points at several
    token counts, as a size's runs at several multipliers are in Gadre et al.'s ladder); the points
    from the largest budget up held out."""
    largest = budgets(points).max()
    size = points["N"].map(lambda n: float(f"{n:.2g}"))  # digitised N scatters around each model's
    runs = pd.DataFrame(
        {
            "model": [name(n, "N") for n in size],
            "size": size.to_numpy(),
            "value": points["loss"].to_numpy(),
            "tokens": points["D"].to_numpy(),
            "role": np.where(points["budget"] >= largest, "held_out", "fit"),
        }
    )
    return Unit("chinchilla", "(N, D)", METRIC, runs, "joint")


def counted_once(points: pd.DataFrame) -> pd.DataFrame:
    """The (N, D) unit's forecasts of an observation a frontier unit holds out, dropped."""
    frontier = points[points["kind"] == "model"]
    shared = points["kind"].eq("joint") & points["observed"].isin(frontier["observed"])
    return points[~shared]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladders", type=Path, default=LADDERS)
    parser.add_argument("--tag", required=True, help="the git tag of the frozen method")
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--points", type=Path, help="every forecast as CSV")
    parser.add_argument("--out", help="write the Markdown report here too")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    start = time.perf_counter()
    data = chinchilla(args.ladders)
    units = [*frontier_units(data), surface_unit(data)]
    raw = pd.concat([forecast_unit(u, args.bootstrap, args.seed) for u in units], ignore_index=True)
    if args.points:
        raw.to_csv(args.points, index=False)
    kept = honest_points(counted_once(raw))
    table = method_table(kept)
    by_kind = pd.concat(
        [method_table(part).assign(unit=kind) for kind, part in kept.groupby("kind")], ignore_index=True
    )
    engine = kept[kept["method"] == "engine"]
    usable = engine["forecast_status"] == "usable"
    missed = usable & ~engine["covered 95%"]
    skills = {
        f"vs {reference}, IS{level:.0%}": skill(kept, reference, level)
        for reference in REFERENCES
        for level in LEVELS
    }
    lines = [
        "# The frozen method scored once on fresh data: Chinchilla (Epoch AI)",
        "",
        f"Method frozen at tag `{args.tag}` (this run's commit {commit()}); "
        f"`python benchmarks/fresh_ladders.py --tag {args.tag} --bootstrap {args.bootstrap} "
        f"--seed {args.seed}`; CPU: {cpu_name()}; {len(units)} units, "
        f"{time.perf_counter() - start:.0f} s (2 cores). "
        "Run once; the method was not changed after it. Units and scores: the script's docstring. "
        f"{len(data)} points, {len(budgets(data))} budgets (half-decade bins of C with at least "
        f"{MIN_POINTS} points), after leaving out the 5 highest losses.",
        "",
        "## Per method",
        "",
        table.to_markdown(index=False, floatfmt=".4g"),
        "",
        "## Per kind of unit (model: the frontier, a law in compute; joint: the (N, D) surface)",
        "",
        by_kind.to_markdown(index=False, floatfmt=".4g"),
        "",
        "## The engine's skill (1 - median engine IS / median reference IS; positive: the engine is better)",
        "",
        *[f"- {label}: {value:.3f}" for label, value in skills.items()],
        "",
        f"Usable: {int(usable.sum())} of {len(engine)} engine forecasts labelled usable, "
        f"{int(missed.sum())} of them outside their 95% interval.",
        "",
        "The held-out points of the (N, D) unit share one fit: their coverage intervals, which treat "
        "observations as independent, are narrower than the evidence.",
        "",
        "## Every held-out point",
        "",
        kept.drop(columns=["bounds"]).to_markdown(index=False, floatfmt=".4g"),
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
