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
whose total cost is within the budget and to which no other candidate can still be added; keep
first the plans that buy the largest candidate the budget affords (:func:`anchored_first`); among
them, draw every plan's outcomes jointly from one draw row of the current forecast's mixture
(:func:`.advise.model_at`: the law forms' run-bootstrap draws, without the discrepancy term), refit,
and rank the plans by the target's expected 95% interval width (:data:`CRITERIA` ``width``).

Why so (``benchmarks/bench_advisor.py``, development ladders of seed 1; its docstring has the
numbers). The earlier rule scored every plan by the expected interval score (Gneiting & Raftery
2007, eq. 43) with outcomes drawn with a discrepancy path (:func:`.advise.coherent_draws`); scored
once on seed 5 it lost to buying the largest affordable size on width and |error|. A forecast's
error beyond the fitted sizes is mostly bias that shrinks with the distance left to the target;
the preposterior world cannot show it (its laws are right by construction, and the discrepancy
term is zero at the start in most ladders), so any criterion read off it traded |error| for
width, and the plan narrowest in hindsight had the larger |error|. What that world does measure
well is the variance the other runs remove once the nearest run is bought. Hence the anchor (the
largest affordable run, for the bias) and the expected width among the anchored plans (for the
variance). The expected interval score, the law forms' spread (max - min of their point forecasts)
and the point forecast's |error| are reported beside it (``criterion="interval_score"`` and
``world="coherent"`` give the earlier rule). Plans share the outcome rows and refit seeds
(:class:`.advise.Preposterior`: common random numbers), so their differences are not Monte Carlo
noise of differently drawn outcomes.

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
    READ,
    WORLDS,
    Candidate,
    Fit,
    Group,
    Preposterior,
    ensemble_at,
    margin95,
    mean_or_nan,
)

#: The most candidates whose subsets are enumerated (2^n sets); more is an error naming the fix.
MOST_CANDIDATES = 12
#: The most plans simulated (each costs ``outcomes`` refits); beyond it, :func:`screened`.
MOST_PLANS = 12
#: plans.csv's columns, best first.
PLAN_COLUMNS = [
    "plan", "cost", "runs", "score", "score_now", "expected_abs_error", "expected_width",
    "expected_width_reduction", "reduction_margin", "outcomes", "expected_form_spread", "width_now",
    "form_spread_now",
]  # fmt: skip
#: What a plan is ranked by: a name of :data:`.advise.READ` -> its plans.csv column (lower is better).
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
    world: str = "model",
    criterion: str = "width",
    anchor: bool = True,
) -> pd.DataFrame:
    """The maximal affordable plans (:data:`PLAN_COLUMNS` and ``members``, the plan's candidate
    labels), best (lowest ``criterion``: :data:`CRITERIA`) first, outcomes drawn from ``world``
    (:data:`.advise.WORLDS`, for the ensemble); with ``anchor``, the plans holding the largest
    affordable candidate first (:func:`anchored_first`); empty when no candidate fits the budget."""
    plans = affordable_plans(candidates, budget)
    if not plans:
        return pd.DataFrame(columns=[*PLAN_COLUMNS, "members"])
    draw = WORLDS[world] if fit is ensemble_at else None
    simulation = Preposterior.start(group, target, candidates, outcomes, seed, fit, draw)
    read = READ.index(criterion)  # the criterion's place in what a refit reads
    largest = largest_affordable(candidates, budget)
    now = simulation.current_outcomes()  # refitted once: the screening and the plans' scores pair with it
    if len(plans) > MOST_PLANS:
        if anchor:  # too many to simulate: screen among the plans the anchor keeps first
            plans = [plan for plan in plans if largest in plan]
        alone = [mean_or_nan(simulation.after([i + 1], [c])[:, read]) for i, c in enumerate(candidates)]
        plans = screened(plans, mean_or_nan(now[:, read]) - np.array(alone, float))
    table = scored_plans(simulation, candidates, plans, criterion, now)
    return anchored_first(table, candidates[largest].label) if anchor else table


def largest_affordable(candidates: list[Candidate], budget: float) -> int:
    """The index of the largest candidate (by size; the cheaper of equal sizes) the budget buys alone."""
    fits = [i for i, c in enumerate(candidates) if c.cost <= budget * (1 + 1e-9)]
    return max(fits, key=lambda i: (candidates[i].size, -candidates[i].cost))


def anchored_first(table: pd.DataFrame, label: str) -> pd.DataFrame:
    """``table`` (plans, best first) with the plans that buy ``label`` first, each part in its order.

    Why (``benchmarks/bench_advisor.py``): a forecast's bias beyond the fitted sizes shrinks with
    the distance left to the target, which the preposterior world cannot show (its forms are right
    by construction), while the variance a plan's other runs remove is what it measures well; so
    the run nearest the target the budget allows is kept, and the preposterior chooses the rest."""
    holds = table["members"].map(lambda members: label in members).to_numpy(bool)
    return pd.concat([table[holds], table[~holds]]).reset_index(drop=True)


def scored_plans(
    simulation: Preposterior,
    candidates: list[Candidate],
    plans: list[tuple[int, ...]],
    criterion: str = "width",
    now: np.ndarray | None = None,
) -> pd.DataFrame:
    """Every plan (indices into ``candidates``, the simulation's columns 1..n) simulated: the table
    :func:`advise_budget` returns, best first; ``now``: the current points' refits
    (:meth:`.advise.Preposterior.current_outcomes`), made here when not given."""
    now = simulation.current_outcomes() if now is None else now
    width_now, spread_now, score_now, _ = (mean_or_nan(column) for column in now.T)
    records = []
    for plan in plans:
        found = simulation.after([i + 1 for i in plan], [candidates[i] for i in plan])
        width, spread, score, error = (mean_or_nan(column) for column in found.T)
        margin = margin95(now[:, 0] - found[:, 0])  # the reduction's 95% Monte Carlo margin
        records.append(
            {
                "plan": plan_label(candidates, plan), "members": tuple(candidates[i].label for i in plan),
                "cost": sum(candidates[i].cost for i in plan), "runs": len(plan), "score": score,
                "score_now": score_now, "expected_abs_error": error, "expected_width": width,
                "expected_width_reduction": width_now - width, "reduction_margin": margin,
                "outcomes": len(simulation.pick),
                "expected_form_spread": spread,
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
