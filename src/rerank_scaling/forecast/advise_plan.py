"""What to buy with a budget: the affordable set of candidate runs whose preposterior target interval
scores best (:mod:`.advise`), not the candidates ranked one by one by width reduction per cost.

Why not the one-by-one ranking. Spending a budget down that ranking is the greedy rule for a
knapsack whose items add up; interval reductions do not add. The target's uncertainty is driven by
how far it lies beyond the largest fitted size (the ensemble's discrepancy term grows with
ln N*/N_max: :mod:`rerank_scaling.laws.discrepancy`), so several cheap runs near the fitted sizes
each look efficient per unit cost, while one run near the target, dear per unit of reduction alone,
is what tells the most about the target. Measured on simulated ladders
(``benchmarks/bench_advisor.py``, its earlier report), the ranking spent the budget on
160M + 80M + 40M, and its |error| was 1.40 times that of buying the one 320M run.

The budget rule (Raiffa & Schlaifer 1961, ch. 4: the preposterior value of an experiment, here of
a set of runs): enumerate the *maximal affordable plans* -- sets of candidates, each at most once,
whose total cost is within the budget and to which no other candidate can still be added -- and
draw every plan's outcomes jointly from one draw row of the current forecast, whose discrepancy
term is one misfit path per row (:func:`.advise.coherent_draws`: a run near the target shares the
target's misfit, so it can reveal it), refit, and score the target's 95% interval against the
target's value in that same row.

The score is the interval score (Gneiting & Raftery 2007, eq. 43: width plus 40 times the miss),
not the width. Measured on development ladders of ``benchmarks/bench_advisor.py`` (a seed other
than the reported one), the width alone misleads: the interval realised after the three cheap runs
was narrower than after the one 320M run in 56% of ladders, yet its |error| larger in 83%; picking
the narrower realised width (an oracle) left |error| 1.41 times the largest run's. Cheap runs short
of the target shrink the bootstrap's spread and the discrepancy term's estimate while the misfit
beyond them stays; a proper score charges the interval for missing. The expected width, the law
forms' spread (max - min of their point forecasts) and the point forecast's |error| are reported
beside it; the form spread was not added to the score (width + spread chose no better on those
ladders). Plans share the outcome rows and refit seeds (:class:`.advise.Preposterior`: common random
numbers), so their differences are not Monte Carlo noise of differently drawn outcomes.

The plan's first run: its member with the largest width reduction per cost alone (the one-by-one
ranking, :func:`.advise.advise`); after it ran, advise again on the remaining budget (sequential:
the refit on the real outcome replaces the drawn ones).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from rerank_scaling.forecast.advise import (
    OUTCOMES,
    WORLDS,
    Candidate,
    Fit,
    Group,
    Preposterior,
    ensemble_at,
    mean_or_nan,
)

#: The most candidates whose subsets are enumerated (2^n sets); more is an error naming the fix.
MOST_CANDIDATES = 12
#: The most plans simulated (each costs ``outcomes`` refits); beyond it, :func:`screened`.
MOST_PLANS = 12
#: plans.csv's columns, best first.
PLAN_COLUMNS = [
    "plan", "cost", "runs", "score", "score_now", "expected_abs_error", "expected_width",
    "expected_width_reduction", "expected_form_spread", "width_now", "form_spread_now",
]  # fmt: skip
#: What a plan is ranked by (a plans.csv column, lower is better), by name.
CRITERIA = {"interval_score": "score", "width": "expected_width"}


def affordable_plans(candidates: list[Candidate], budget: float) -> list[tuple[int, ...]]:
    """Indices of the maximal affordable plans (module docstring), cheapest-first within each plan;
    none when no candidate fits the budget."""
    if len(candidates) > MOST_CANDIDATES:
        raise ValueError(
            f"{len(candidates)} candidates: a budget's plans are enumerated for at most "
            f"{MOST_CANDIDATES}; list fewer candidates"
        )
    costs = np.array([c.cost for c in candidates], float)
    plans = []
    for size in range(1, len(candidates) + 1):
        for plan in combinations(range(len(candidates)), size):
            left = budget - costs[list(plan)].sum()
            if left < -1e-9 * budget:
                continue
            others = np.setdiff1d(np.arange(len(candidates)), plan)
            if not (costs[others] <= left + 1e-9 * budget).any():
                plans.append(tuple(sorted(plan, key=lambda i: costs[i])))
    return plans


def screened(plans: list[tuple[int, ...]], reductions: np.ndarray) -> list[tuple[int, ...]]:
    """The :data:`MOST_PLANS` plans most promising by their runs' expected score reductions alone: half by
    the best member's (a plan does at least what its best run does alone), half by their sum (at
    most, when reductions add)."""
    gain = np.nan_to_num(reductions, nan=-np.inf)
    by_best = sorted(plans, key=lambda p: (-max(gain[list(p)]), -sum(gain[list(p)])))
    by_sum = sorted(plans, key=lambda p: -sum(gain[list(p)]))
    kept = list(dict.fromkeys([*by_best[: MOST_PLANS // 2], *by_sum]))
    return kept[:MOST_PLANS]


def plan_label(candidates: list[Candidate], plan: tuple[int, ...]) -> str:
    return " + ".join(candidates[i].label for i in plan)


def advise_budget(
    group: Group,
    target: float,
    candidates: list[Candidate],
    budget: float,
    outcomes: int = OUTCOMES,
    seed: int = 0,
    fit: Fit = ensemble_at,
    world: str = "coherent",
    criterion: str = "interval_score",
) -> pd.DataFrame:
    """The maximal affordable plans (:data:`PLAN_COLUMNS` and ``members``, the plan's candidate
    labels), best (lowest ``criterion``: :data:`CRITERIA`) first, outcomes drawn from ``world``
    (:data:`.advise.WORLDS`, for the ensemble); empty when no candidate fits the budget."""
    plans = affordable_plans(candidates, budget)
    if not plans:
        return pd.DataFrame(columns=[*PLAN_COLUMNS, "members"])
    draw = WORLDS[world] if fit is ensemble_at else None
    simulation = Preposterior.start(group, target, candidates, outcomes, seed, fit, draw)
    read = {"score": 2, "expected_width": 0}[CRITERIA[criterion]]
    if len(plans) > MOST_PLANS:
        now = simulation.current()[read]
        alone = [mean_or_nan(simulation.after([i + 1], [c])[:, read]) for i, c in enumerate(candidates)]
        plans = screened(plans, now - np.array(alone, float))
    return scored_plans(simulation, candidates, plans, criterion)


def scored_plans(
    simulation: Preposterior,
    candidates: list[Candidate],
    plans: list[tuple[int, ...]],
    criterion: str = "interval_score",
) -> pd.DataFrame:
    """Every plan (indices into ``candidates``, the simulation's columns 1..n) simulated: the table
    :func:`advise_budget` returns, best first."""
    width_now, spread_now, score_now, _ = simulation.current()
    records = []
    for plan in plans:
        found = simulation.after([i + 1 for i in plan], [candidates[i] for i in plan])
        width, spread, score, error = (mean_or_nan(column) for column in found.T)
        records.append(
            {
                "plan": plan_label(candidates, plan), "members": tuple(candidates[i].label for i in plan),
                "cost": sum(candidates[i].cost for i in plan), "runs": len(plan), "score": score,
                "score_now": score_now, "expected_abs_error": error, "expected_width": width,
                "expected_width_reduction": width_now - width, "expected_form_spread": spread,
                "width_now": width_now, "form_spread_now": spread_now,
            }
        )  # fmt: skip
    table = pd.DataFrame(records, columns=[*PLAN_COLUMNS, "members"])
    return table.sort_values(CRITERIA[criterion], kind="stable", na_position="last").reset_index(drop=True)


def first_of_plan(advice: pd.DataFrame, plans: pd.DataFrame) -> pd.DataFrame:
    """``advice`` (one row per candidate) reordered: the best plan's runs first, in their own order
    (reduction per cost), then the rest; ``in_best_plan`` says which."""
    if plans.empty:
        return advice.assign(in_best_plan=False)
    members = set(plans["members"].iloc[0])
    chosen = advice["candidate"].isin(members)
    return pd.concat([advice[chosen], advice[~chosen]]).assign(in_best_plan=chosen).reset_index(drop=True)
