"""Which run to buy next: the candidate that shrinks the target forecast's 95% interval most per
unit of cost, by preposterior simulation (Raiffa & Schlaifer 1961, "Applied Statistical Decision
Theory", ch. 4: the preposterior distribution of a statistic before the data are seen).

For the target size N* and a candidate run at N_c, with the current forecast's joint draws
(:func:`rerank_scaling.laws.ensemble.widened_draws`: the equal-weight mixture of the law forms,
their run-bootstrap draws, which already hold a new run's offset and checkpoint noise, and the
model-discrepancy term beyond the fitted sizes):

1. draw the candidate's outcome y_k from the draws' column at N_c (k = 1..K; draw rows shared by
   every candidate: common random numbers, so candidates are compared on the same outcomes);
2. add (N_c, y_k) to the fitted points -- a size already fitted gets one more seed, averaged in as
   :func:`rerank_scaling.laws.protocols.prepare` averages seeds (its weight ``seeds`` + 1);
3. refit the ensemble as the fit stage does (:func:`.ensemble_at`: the same functions,
   :func:`~rerank_scaling.laws.ensemble.fit_members` and ``widened_draws``) and read the target's
   95% interval width W_k and the spread of the members' point forecasts (max - min across forms);
4. the expected width is the mean of W_k; the reduction W_now - E[W] is ranked per unit cost.

The refits use the same bootstrap seeds for every candidate (k-th refit: ``seed + 1 + k``), and
W_now is the mean width of refits on the current points with those seeds, so the differences are
not resampling noise of differently seeded widths (common random numbers). Known answer
(``tests/forecast/test_advise.py``): for a straight line fitted by least squares the prediction
variance at x* after adding x is s^2 (1, x*) (X'X + x x')^-1 (1, x*)'; :func:`preposterior` with a
linear ``refit`` ranks the candidates as that formula does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rerank_scaling.laws import ensemble
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.forms import SCALES

#: Preposterior outcomes per candidate: each costs one refit of the ensemble.
OUTCOMES = 4


@dataclass(frozen=True)
class Candidate:
    """A run one could train: its label, size N, price (any unit, one for all), steps and seed."""

    label: str
    size: float
    cost: float
    steps: float | None = None
    seed: str | None = None


@dataclass(frozen=True)
class TargetForecast:
    """What one fit says at the target: its 95% interval's width, the members' point forecasts'
    spread, and the draws at every held-out column (target first)."""

    width: float
    form_spread: float
    draws: np.ndarray  # (B, held-out columns)


def point_at(template: pd.Series, label: str, size: float) -> dict:
    """A held-out point without an observation at ``size`` (N on the law's scale), copied from a
    fitted point of the same group."""
    return template.to_dict() | {
        "model": label, "size": size, "N": size / SCALES["N"], "value": np.nan, "role": "held_out",
        "seeds": 1, "final": True,
    }  # fmt: skip


@dataclass(frozen=True)
class Group:
    """One metric group's fitted points and how the fit stage fits them."""

    metric: str
    fit_rows: pd.DataFrame  # the model protocol's fitted points (one per size, seeds averaged)
    settings: FitSettings
    spread: tuple[float, float] = (0.0, 0.0)  # seed spread (laws.protocols.seed_spread)
    ceiling: float | None = None

    def held(self, sizes: list[tuple[str, float]]) -> pd.DataFrame:
        template = self.fit_rows.sort_values("N").iloc[-1]
        return pd.DataFrame([point_at(template, label, size) for label, size in sizes])


def ensemble_at(group: Group, fit_rows: pd.DataFrame, held: pd.DataFrame, seed: int) -> TargetForecast | None:
    """The ensemble fitted to ``fit_rows`` as the fit stage fits it, read at ``held``'s points
    (its first row: the target); None when no member forecasts."""
    args = (group.metric, fit_rows, held, group.settings, seed, group.spread, group.ceiling)
    usable = ensemble.usable_members(ensemble.fit_members(*args))
    if not usable:
        return None
    draws, _ = ensemble.widened_draws(
        usable, group.metric, fit_rows, group.settings, seed, group.spread, group.ceiling
    )
    if draws is None:
        return None
    columns = len(fit_rows)
    draws = draws[:, columns:]
    support = ensemble.support_of(usable)
    forms = [
        float(np.median(ensemble.forecast_draws(f.intervals, support)[:, columns])) for f in usable.values()
    ]
    _, low, high = ensemble.summarise(draws[:, :1])
    return TargetForecast(float(high[0] - low[0]), float(np.ptp(forms)), draws)


def with_outcome(fit_rows: pd.DataFrame, candidate: Candidate, value: float) -> pd.DataFrame:
    """The fitted points after ``candidate`` ran and scored ``value`` at its final checkpoint.

    A size already fitted gets one more seed, averaged in as ``prepare`` averages seeds (weight
    ``seeds``), at each of its fitted checkpoints. A new size gets the largest fitted run's
    checkpoints (the fit stage fits ``last_k`` per run), shifted so that its final one is ``value``:
    one run, with the within-run shape of the nearest one."""
    n = candidate.size / SCALES["N"]
    same = np.isclose(fit_rows["N"].to_numpy(float), n, rtol=1e-9)
    if same.any():
        rows = fit_rows.copy()
        seeds = rows.loc[same, "seeds"].astype(float)
        final = rows.loc[same, "value"].iloc[rows.loc[same, "step"].to_numpy().argmax()]
        shifted = rows.loc[same, "value"] + (value - final)  # the new run's checkpoints
        rows.loc[same, "value"] = (rows.loc[same, "value"] * seeds + shifted) / (seeds + 1)
        rows.loc[same, "seeds"] = seeds + 1
        return rows
    largest = fit_rows[fit_rows["N"] == fit_rows["N"].max()].sort_values("step")
    run = largest.assign(
        model=candidate.label, size=candidate.size, N=n, seeds=1, role="fit",
        value=largest["value"] + (value - float(largest["value"].iloc[-1])),
    )  # fmt: skip
    return pd.concat([fit_rows, run], ignore_index=True)


Refit = Callable[[pd.DataFrame, int], float]


def preposterior(
    outcomes: np.ndarray, fit_rows: pd.DataFrame, candidate: Candidate, refit: Refit, seed: int
) -> np.ndarray:
    """The target's interval width after ``candidate`` scored each of ``outcomes``: ``refit(rows,
    seed + k)`` on the fitted points with the k-th outcome added (:func:`with_outcome`)."""
    return np.array(
        [refit(with_outcome(fit_rows, candidate, float(y)), seed + k) for k, y in enumerate(outcomes)]
    )


Fit = Callable[["Group", pd.DataFrame, pd.DataFrame, int], "TargetForecast | None"]


def advise(
    group: Group,
    target: float,
    candidates: list[Candidate],
    outcomes: int = OUTCOMES,
    seed: int = 0,
    fit: Fit = ensemble_at,
) -> pd.DataFrame:
    """One row per candidate, best first (module docstring): ``candidate, size, steps, seed, cost,
    expected_width, expected_width_reduction, reduction_per_cost, width_now, form_spread_now,
    expected_form_spread``. ``fit`` is how the points are fitted (the fit stage's ensemble; a
    test's least squares)."""
    held = group.held([("target", target), *((c.label, c.size) for c in candidates)])
    now = fit(group, group.fit_rows, held, seed)
    if now is None:
        raise ValueError(f"{group.metric}: no law form forecasts the target from these runs; add sizes")
    pick = np.random.default_rng(seed).integers(0, len(now.draws), outcomes)
    target_only = held.iloc[:1]
    spreads: dict[int, float] = {}

    def refit(rows: pd.DataFrame, refit_seed: int) -> float:
        after = fit(group, rows, target_only, refit_seed)
        spreads[refit_seed] = np.nan if after is None else after.form_spread
        return np.nan if after is None else after.width

    # the width now, from the refits' own seeds: a reduction is then not the resampling noise of two
    # differently seeded widths (common random numbers)
    width_now = float(np.nanmean([refit(group.fit_rows, seed + 1 + k) for k in range(outcomes)]))
    spread_now = float(np.nanmean(list(spreads.values())))
    records = []
    for column, candidate in enumerate(candidates, start=1):
        spreads.clear()
        widths = preposterior(now.draws[pick, column], group.fit_rows, candidate, refit, seed + 1)
        expected = float(np.nanmean(widths)) if np.isfinite(widths).any() else np.nan
        records.append(
            {
                "candidate": candidate.label, "size": candidate.size, "steps": candidate.steps,
                "seed": candidate.seed, "cost": candidate.cost, "expected_width": expected,
                "expected_width_reduction": width_now - expected,
                "reduction_per_cost": (width_now - expected) / candidate.cost,
                "width_now": width_now, "form_spread_now": spread_now,
                "expected_form_spread": float(np.nanmean(list(spreads.values()))),
            }
        )  # fmt: skip
    table = pd.DataFrame(records)
    return table.sort_values("reduction_per_cost", ascending=False, kind="stable").reset_index(drop=True)
