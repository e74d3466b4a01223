"""Which run to buy next: the candidate that shrinks the target forecast's 95% interval most per
unit of cost, by preposterior simulation (Raiffa & Schlaifer 1961, "Applied Statistical Decision
Theory", ch. 4: the preposterior distribution of a statistic before the data are seen).

For the target size N* and a candidate run at N_c, with the current forecast's joint draws
(:func:`model_at`: the equal-weight mixture of the law forms and their run-bootstrap draws, which
already hold a new run's offset and checkpoint noise; without the model-discrepancy term the fit
stage adds beyond the fitted sizes, whose plug-in is zero at the start of most ladders and whose
misfit path, :func:`coherent_at`, chose worse runs: :mod:`.advise_plan`):

1. draw the candidate's outcome y_k from the draws' column at N_c (k = 1..K; draw rows shared by
   every candidate: common random numbers, so candidates are compared on the same outcomes);
2. add (N_c, y_k) to the fitted points -- a size already fitted gets one more seed, averaged in as
   :func:`rerank_scaling.laws.protocols.prepare` averages seeds (its weight ``seeds`` + 1);
3. refit the ensemble as the fit stage does (:func:`.ensemble_at`: the same functions,
   :func:`~rerank_scaling.laws.ensemble.fit_members` and ``widened_draws``) and read the target's
   95% interval width W_k and the spread of the members' point forecasts (max - min across forms);
4. the expected width is the mean of W_k; the reduction W_now - E[W] is ranked per unit cost.

The expected reduction is a Monte Carlo estimate over K outcomes, and the refits' percentile
widths are noisy themselves (the fit stage's resamples), so each row carries its 95% Monte Carlo margin
(``reduction_margin``: the half-width of the Student-t interval, K - 1 degrees of freedom, of the
mean of the paired reductions W_now,k - W_k) and whether the simulation can tell the candidate
from the best (``tied_with_best``: the paired differences of their reductions per unit cost,
(W_now,k - W_k^best) / c_best - (W_now,k - W_k) / c, have a mean within their 95% margin of zero,
the test :mod:`rerank_scaling.planning.decisions` puts to its Monte Carlo P(best)). On the
embedded default's runs the first-ranked candidate changes with the seed at the command's 4
outcomes and at the stage's 16 (``benchmarks/bench_advice_noise.py``); the answer names the run
beyond its noise and those the simulation cannot tell apart
(:func:`rerank_scaling.report.answer_advice.next_sentence`).

The refits use the same bootstrap seeds for every candidate (k-th refit: ``seed + 1 + k``), and
W_now is the mean width of refits on the current points with those seeds, so the differences are
not resampling noise of differently seeded widths (common random numbers). Known answer
(``tests/forecast/test_advise.py``): for a straight line fitted by least squares the prediction
variance at x* after adding x is s^2 (1, x*) (X'X + x x')^-1 (1, x*)'; :func:`advise` with a
least-squares ``fit`` ranks the candidates as that formula does. With a budget, the advice is the
affordable set of runs, not this ranking spent down (:mod:`.advise_plan`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rerank_scaling.laws import discrepancy, ensemble
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
    spread, the draws at every held-out column (target first), the interval and the point forecast
    (the median of the members' forecasts, as the fit stage's)."""

    width: float
    form_spread: float
    draws: np.ndarray  # (B, held-out columns)
    low: float = np.nan
    high: float = np.nan
    point: float = np.nan


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


def ensemble_at(
    group: Group, fit_rows: pd.DataFrame, held: pd.DataFrame, seed: int, world: str = "widened"
) -> TargetForecast | None:
    """The ensemble fitted to ``fit_rows`` as the fit stage fits it, read at ``held``'s points
    (its first row: the target); None when no member forecasts. ``world``: ``widened``, the fit
    stage's draws; ``coherent``, the discrepancy term one misfit path per draw row
    (:func:`coherent_draws`); ``model``, the mixture's draws without a discrepancy term
    (:func:`model_at`)."""
    args = (group.metric, fit_rows, held, group.settings, seed, group.spread, group.ceiling)
    usable = ensemble.usable_members(ensemble.fit_members(*args))
    if not usable:
        return None
    if world == "coherent":
        draws = coherent_draws(group, usable, fit_rows, seed)
    elif world == "model":
        draws = ensemble.pooled_draws(usable)
    else:
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
    return TargetForecast(
        float(high[0] - low[0]), float(np.ptp(forms)), draws, float(low[0]), float(high[0]),
        float(np.median(forms)),
    )  # fmt: skip


def coherent_draws(group: Group, usable: dict, fit_rows: pd.DataFrame, seed: int) -> np.ndarray | None:
    """The mixture's draws with the discrepancy term (:func:`rerank_scaling.laws.ensemble.discrepancy_sd`)
    as one path per draw row, z s_1 ln(N / N_max) with one z per row, instead of independent per point:
    a misfit is a curve that bends away, so a run near the target and the target itself share it.
    Each column's distribution is the fit stage's (:func:`~rerank_scaling.laws.ensemble.widened_draws`);
    only the dependence across columns differs, which is what a candidate's outcome tells of the
    target."""
    draws = ensemble.pooled_draws(usable)
    if draws is None:
        return None
    per_ln_n, _ = ensemble.discrepancy_sd(
        group.metric, fit_rows, group.settings, seed, group.spread, group.ceiling
    )
    sizes = next(iter(usable.values())).rows["N"].to_numpy(float)
    path = np.random.default_rng(seed).standard_normal((len(draws), 1))
    draws = draws + path * per_ln_n * discrepancy.distances(sizes, fit_rows["N"])
    support = ensemble.support_of(usable)
    return draws if support is None else np.clip(draws, *support)


def interval_score(forecast: TargetForecast, truth: float, alpha: float = 0.05) -> float:
    """The interval score of a central (1 - alpha) interval (Gneiting & Raftery 2007, "Strictly proper
    scoring rules", eq. 43): its width plus 2/alpha times how far the truth lies outside it; lower is
    better, and a narrow interval that misses scores worse than a wide one that covers."""
    below, above = max(forecast.low - truth, 0.0), max(truth - forecast.high, 0.0)
    return forecast.width + 2 / alpha * (below + above)


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


Fit = Callable[["Group", pd.DataFrame, pd.DataFrame, int], "TargetForecast | None"]


def coherent_at(group: Group, fit_rows: pd.DataFrame, held: pd.DataFrame, seed: int) -> TargetForecast | None:
    """:func:`ensemble_at` with its discrepancy term one path per draw row: the joint draws outcomes
    come from (:func:`coherent_draws`)."""
    return ensemble_at(group, fit_rows, held, seed, world="coherent")


def model_at(group: Group, fit_rows: pd.DataFrame, held: pd.DataFrame, seed: int) -> TargetForecast | None:
    """:func:`ensemble_at` in the world where the law forms are right: the mixture's run-bootstrap
    draws (a new run's offset and checkpoint noise included) without the discrepancy term."""
    return ensemble_at(group, fit_rows, held, seed, world="model")


#: The worlds outcomes may be drawn from (:meth:`Preposterior.start`'s ``draw``).
WORLDS = {"coherent": coherent_at, "model": model_at}


#: What :meth:`Preposterior.after` reads off each refit, in its columns' order.
READ = ("width", "form_spread", "interval_score", "abs_error")


@dataclass
class Preposterior:
    """What every candidate (or set of candidates) is compared on: the current forecast's joint draws
    (``now``), the rows drawn as outcomes (``pick``, shared by all: common random numbers) and the
    refits' seeds (outcome k refitted with ``seed + 1 + k``, the width now too). The k-th draw row
    also holds the target's value in that world (column 0), which the refit's interval and point
    forecast are scored against."""

    group: Group
    held: pd.DataFrame  # the target first, then one column per candidate
    now: TargetForecast
    pick: np.ndarray
    seed: int
    fit: Fit

    @classmethod
    def start(
        cls, group: Group, target: float, candidates: list[Candidate], outcomes: int, seed: int, fit: Fit,
        draw: Fit | None = None,
    ) -> Preposterior:  # fmt: skip
        """``draw`` fits the draws outcomes come from (default: :func:`model_at` for the
        ensemble, else ``fit``)."""
        held = group.held([("target", target), *((c.label, c.size) for c in candidates)])
        draw = draw or (model_at if fit is ensemble_at else fit)
        now = draw(group, group.fit_rows, held, seed)
        if now is None:
            raise ValueError(f"{group.metric}: no law form forecasts the target from these runs; add sizes")
        pick = np.random.default_rng(seed).integers(0, len(now.draws), outcomes)
        return cls(group, held, now, pick, seed, fit)

    def refit(self, rows: pd.DataFrame, k: int) -> tuple[float, ...]:
        """:data:`READ` of the k-th outcome's refit on ``rows`` (NaN: no forecast)."""
        after = self.fit(self.group, rows, self.held.iloc[:1], self.seed + 1 + k)
        if after is None:
            return (np.nan,) * len(READ)
        truth = float(self.now.draws[self.pick[k], 0])
        return after.width, after.form_spread, interval_score(after, truth), abs(after.point - truth)

    def current_outcomes(self) -> np.ndarray:
        """(outcomes, :data:`READ`) of the current points, the k-th refitted with the k-th seed: what
        each outcome's refit is paired with (their mean, not one differently seeded refit, is "now":
        a reduction is then not the resampling noise of two differently seeded widths)."""
        return np.array([self.refit(self.group.fit_rows, k) for k in range(len(self.pick))], float)

    def after(self, columns: list[int], candidates: list[Candidate]) -> np.ndarray:
        """(outcomes, :data:`READ`) after every one of ``candidates`` ran (their held columns
        ``columns``), each outcome one joint draw row of the current forecast: the runs of one set
        are drawn together, as the curve they share would make them."""
        found = []
        for k, row in enumerate(self.pick):
            rows = self.group.fit_rows
            for column, candidate in zip(columns, candidates, strict=True):
                rows = with_outcome(rows, candidate, float(self.now.draws[row, column]))
            found.append(self.refit(rows, k))
        return np.array(found, float).reshape(len(self.pick), len(READ))


def mean_or_nan(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else np.nan


def margin95(values: np.ndarray) -> float:
    """The half-width of the 95% Student-t interval of the mean of ``values``' finite entries (n - 1
    degrees of freedom: a few outcomes estimate their own spread poorly); NaN below two."""
    finite = values[np.isfinite(values)]
    if len(finite) < 2:
        return np.nan
    return float(stats.t.ppf(0.975, len(finite) - 1) * np.std(finite, ddof=1) / np.sqrt(len(finite)))


def tied_with_first(per_cost: list[np.ndarray]) -> list[bool]:
    """For paired per-outcome reductions per unit cost (the best candidate first): whether the
    simulation cannot tell each candidate from the best, the mean of their paired differences
    within its 95% margin (:func:`margin95`) of zero (True, unknown, where fewer than two pair)."""
    found = []
    for values in per_cost:
        difference = per_cost[0] - values
        margin = margin95(difference)
        found.append(not (np.isfinite(margin) and mean_or_nan(difference) > margin))
    return found


#: What forked workers of :func:`simulated` read: set in the parent just before they fork.
_FORKED: tuple[Preposterior, list[Candidate]] | None = None


def simulated_one(simulation: Preposterior, candidates: list[Candidate], task: int) -> np.ndarray:
    """(outcomes, :data:`READ`): task 0 the current points' refits, task i candidate i's."""
    if task == 0:
        return simulation.current_outcomes()
    return simulation.after([task], [candidates[task - 1]])


def _forked_task(task: int) -> np.ndarray:
    simulation, candidates = _FORKED
    return simulated_one(simulation, candidates, task)


def simulated(simulation: Preposterior, candidates: list[Candidate], workers: int = 1) -> list[np.ndarray]:
    """:func:`simulated_one` of the current points and of every candidate, in ``workers`` forked
    processes (each refit's seed is its outcome's, so the numbers are the serial run's)."""
    global _FORKED
    tasks = range(len(candidates) + 1)
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [simulated_one(simulation, candidates, task) for task in tasks]
    _FORKED = (simulation, candidates)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=context) as pool:
            return list(pool.map(_forked_task, tasks))
    finally:
        _FORKED = None


def advise(
    group: Group,
    target: float,
    candidates: list[Candidate],
    outcomes: int = OUTCOMES,
    seed: int = 0,
    fit: Fit = ensemble_at,
    workers: int = 1,
) -> pd.DataFrame:
    """One row per candidate, best first (module docstring): ``candidate, size, steps, seed, cost,
    expected_width, expected_width_reduction, reduction_per_cost, reduction_margin, tied_with_best,
    outcomes, width_now, form_spread_now, expected_form_spread``. ``fit`` is how the points are
    fitted (the fit stage's ensemble; a test's least squares), in ``workers`` processes."""
    simulation = Preposterior.start(group, target, candidates, outcomes, seed, fit)
    now, *after = simulated(simulation, candidates, workers)
    width_now, spread_now = mean_or_nan(now[:, 0]), mean_or_nan(now[:, 1])
    records, paired = [], []
    for candidate, found in zip(candidates, after, strict=True):
        expected = mean_or_nan(found[:, 0])
        paired.append((now[:, 0] - found[:, 0]) / candidate.cost)  # this outcome's reduction per cost
        records.append(
            {
                "candidate": candidate.label, "size": candidate.size, "steps": candidate.steps,
                "seed": candidate.seed, "cost": candidate.cost, "expected_width": expected,
                "expected_width_reduction": width_now - expected,
                "reduction_per_cost": (width_now - expected) / candidate.cost,
                "reduction_margin": margin95(now[:, 0] - found[:, 0]), "outcomes": outcomes,
                "width_now": width_now, "form_spread_now": spread_now,
                "expected_form_spread": mean_or_nan(found[:, 1]),
            }
        )  # fmt: skip
    table = pd.DataFrame(records)
    order = table.sort_values("reduction_per_cost", ascending=False, kind="stable").index
    table = table.loc[order].reset_index(drop=True)
    return table.assign(tied_with_best=tied_with_first([paired[i] for i in order]))
