"""Decisions with their uncertainty: the fit's bootstrap draws pushed through the argmax.

A plan's question is discrete: *which of these candidates (configured sizes, each with the examples
its budget buys) should we train?* Each bootstrap refit theta*_b of the law (the fit stage's
parametric run bootstrap, :mod:`rerank_scaling.laws.fit_statistics`) forecasts every candidate's
expected metric M_bk; over the B draws, per candidate k:

    P(best)_k          = mean_b 1[k = argmax_j sign M_bj]        (ties share the credit)
    expected regret_k  = mean_b (max_j sign M_bj - sign M_bk)    (metric points given up)
    P(ROI >= lambda)_k = mean_b 1[V(M_bk) / Z_k >= lambda]       (Scaling Laws for Online Advertisement
    Retrieval eqs. 5-6; NaN without a value map)

The verdict is ``train <k>`` when the best P(best) reaches ``planning.decision_p_best`` (default
0.8); below it, ``prefer <k>`` with the numbers (the two leading P(best) and how much their 95%
intervals overlap) when the draws still rank k first: its P(best) exceeds the runner-up's by more
than 1.96 Monte Carlo standard errors of that difference, sqrt((p1 + p2 - (p1 - p2)^2) / B) (two
cells of one multinomial). ``cannot decide`` is kept for what the draws truly cannot rank: no or
too few draws (< :data:`MIN_DRAWS`), no candidate with a forecast, or the two leading candidates
tied within that Monte Carlo noise. Candidates outside the validated range
(:class:`~.forecast.ValidatedRange`) are compared on the same draws (the law extrapolated) and
flagged: their status is ``beyond_validated_range`` with their extrapolation ratio, and a decision
whose top candidate lies there is ``extrapolated`` (the law's ranking, unchecked by any backtest).
A single candidate with a forecast (the rest unaffordable) is trained: there is nothing to rank.

What P(best) is: the bootstrap probability that k is the argmax, i.e. a posterior under a flat
prior on the gap between candidates (bootstrap selection frequencies), not a frequentist guarantee
for one fixed truth. Measured on simulated ladders with the default's noise and truths drawn from
a spread (``benchmarks/results/decisions_calibration.md``, 200 truths, 100 ties, planning's mixture
of the additive and multiplicative laws): the top candidate was the true best in 15 of 38 at
P(best) below 0.5 (mean 0.42) and 75 of 87 in [0.5, 0.8) (mean 0.64); ``train`` verdicts were right
in 74 of 75 (0.99; 95% CI [0.93, 1.00]) at a mean P(best) of 0.91, so P(best) under-states how
often the choice is right there (the simulated truth is additive: the multiplicative member only
widens the draws). Under an exact tie P(best) >= 0.8 needs the estimated gap to exceed 0.84 of its
standard error (~40% of fits with right draws); 76 of 100 ties were left undecided. Such a choice
costs nothing (zero regret), which ``expected_regret`` shows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Draws needed to state a probability at all (fewer: "cannot decide", with the count).
MIN_DRAWS = 20
BEYOND = "beyond_validated_range"


@dataclass(frozen=True)
class Decision:
    """The verdict on one question, and every candidate's numbers (``candidates``)."""

    verdict: str  # "train <label>" | "prefer <label>" | "cannot decide"
    candidate: str  # the candidate with the highest P(best) ("" when none was compared)
    p_best: float
    expected_regret: float
    p_roi: float
    reason: str
    extrapolated: bool  # the top candidate lies beyond the validated range
    # per candidate: label, status, extrapolation, predicted, low, high, p_best, expected_regret, p_roi
    candidates: pd.DataFrame

    def record(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "candidate": self.candidate,
            "p_best": self.p_best,
            "expected_regret": self.expected_regret,
            "p_roi": self.p_roi,
            "reason": self.reason,
            "extrapolated": self.extrapolated,
        }


def argmax_statistics(utility: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(best), expected regret) of each column of ``utility`` (B, K), larger is better; a draw
    where several candidates tie for the maximum gives each an equal share; -inf: infeasible."""
    best = utility.max(axis=1, keepdims=True)
    ties = (utility == best) & np.isfinite(best)
    share = ties / np.maximum(ties.sum(axis=1, keepdims=True), 1)
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # infeasible in every draw: no regret (NaN)
        regret = np.where(np.isfinite(utility) & np.isfinite(best), best - utility, np.nan)
        return share.mean(axis=0), np.nanmean(regret, axis=0)


def _overlap(low: np.ndarray, high: np.ndarray, i: int, j: int) -> float:
    """Length of the intersection of two intervals (negative: the gap between them)."""
    return float(min(high[i], high[j]) - max(low[i], low[j]))


def decide(
    labels: list[str],
    draws: np.ndarray,
    extrapolation: np.ndarray,
    validated_ratio: float,
    sign: int,
    threshold: float,
    roi: np.ndarray | None = None,
    lam: float = 1.0,
    feasible: np.ndarray | None = None,
    unaffordable: np.ndarray | None = None,
) -> Decision:
    """The verdict among candidates ``labels`` from ``draws`` (B, K) of their expected metric.

    ``extrapolation`` (K,) is each candidate's ratio to the fitted range; those above
    ``validated_ratio`` are compared and flagged (status ``beyond_validated_range``); those whose
    draws are all NaN (unaffordable, no forecast) are not compared. ``roi`` (B, K): the ROI of each
    draw and candidate, for P(ROI >= ``lam``). ``feasible`` (B, K): the constraint of eqs. 5-6 per
    draw (the argmax among feasible ones). ``unaffordable`` (K,): candidates the budget cannot pay
    for (listed as such, not compared).
    """
    draws = np.asarray(draws, float)
    k = len(labels)
    extrapolation = np.asarray(extrapolation, float)
    poor = np.zeros(k, bool) if unaffordable is None else np.asarray(unaffordable, bool)
    beyond = ~poor & (extrapolation > validated_ratio * (1 + 1e-9))
    finite_any = np.isfinite(draws).any(axis=0) if len(draws) else np.zeros(k, bool)
    compared = ~poor & finite_any
    status = np.where(
        poor, "unaffordable", np.where(~finite_any, "no_forecast", np.where(beyond, BEYOND, "compared"))
    )
    table = pd.DataFrame({"label": labels, "status": status, "extrapolation": extrapolation})
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # a candidate without forecasts: NaN
        table["predicted"] = np.nanmedian(draws, axis=0) if len(draws) else np.nan
        table["low"] = np.nanpercentile(draws, 2.5, axis=0) if len(draws) else np.nan
        table["high"] = np.nanpercentile(draws, 97.5, axis=0) if len(draws) else np.nan
        p_roi = (
            np.nanmean(np.where(np.isfinite(roi), roi >= lam, np.nan), axis=0) if roi is not None else None
        )
    table["p_roi"] = p_roi if p_roi is not None else np.nan
    table["p_best"] = np.nan
    table["expected_regret"] = np.nan
    why = {
        "unaffordable": "is unaffordable (serving alone uses up the budget)",
        "no_forecast": "has no forecast",
    }
    excluded = "; ".join(f"{labels[i]} {why[status[i]]}" for i in range(k) if not compared[i])
    flagged = "; ".join(
        f"{labels[i]} at {extrapolation[i]:.3g}x is beyond the validated {validated_ratio:.3g}x "
        "(extrapolation)"
        for i in range(k)
        if compared[i] and beyond[i]
    )
    notes = "; ".join(filter(None, [flagged, excluded]))

    def verdict(
        word: str, reason: str, best: int | None = None, p: float = np.nan, regret: float = np.nan
    ) -> Decision:
        label = labels[best] if best is not None else ""
        r = float(table.at[best, "p_roi"]) if best is not None else np.nan
        full = "; ".join(filter(None, [reason, notes]))
        out = f"{word} {label}".strip() if word != "cannot decide" else word
        return Decision(out, label, p, regret, r, full, bool(best is not None and beyond[best]), table)

    if not len(draws):
        return verdict(
            "cannot decide",
            "the fit has no bootstrap draws (params_draws of fits.parquet); re-run the fit stage",
        )
    index = np.flatnonzero(compared)
    if len(index) == 0:
        return verdict("cannot decide", "no candidate has a forecast")
    if len(index) == 1:
        table.loc[index, ["p_best", "expected_regret"]] = [1.0, 0.0]
        return verdict("train", "the only candidate with a forecast: nothing to rank", index[0], 1.0, 0.0)
    values = draws[:, index]
    keep = np.isfinite(values).all(axis=1)
    if keep.sum() < MIN_DRAWS:
        return verdict(
            "cannot decide",
            f"{int(keep.sum())} of {len(draws)} bootstrap draws forecast every candidate (< {MIN_DRAWS})",
        )
    utility = sign * values[keep]
    if feasible is not None:
        utility = np.where(np.asarray(feasible, bool)[:, index][keep], utility, -np.inf)
    p_best, regret = argmax_statistics(utility)
    table.loc[index, "p_best"] = p_best
    table.loc[index, "expected_regret"] = regret
    order = index[np.argsort(-p_best, kind="stable")]
    top, second = order[0], order[1]
    p1, p2 = float(table.at[top, "p_best"]), float(table.at[second, "p_best"])
    head = (
        f"P(best) {p1:.2f} for {labels[top]} vs {p2:.2f} for {labels[second]}; expected regret "
        f"{table.at[top, 'expected_regret']:.3g} ({int(keep.sum())} draws)"
    )
    if feasible is not None:
        none = float(1 - np.nansum(p_best))
        if none > 0:
            head += f"; no candidate meets the ROI constraint in {none:.2f} of the draws"
    numbers = (top, p1, float(table.at[top, "expected_regret"]))
    if p1 >= threshold:
        return verdict("train", head, *numbers)
    low, high = table["low"].to_numpy(), table["high"].to_numpy()
    overlap = _overlap(low, high, top, second)
    size = f"overlap by {overlap:.3g}" if overlap >= 0 else f"are {-overlap:.3g} apart"
    spans = ", ".join(f"{labels[i]} [{low[i]:.3g}, {high[i]:.3g}]" for i in (top, second))
    below = f"{head}, below {threshold:.2f}; 95% intervals {size} ({spans})"
    noise = monte_carlo_se(p1, p2, int(keep.sum()))
    if p1 - p2 <= 1.96 * noise:
        return verdict(
            "cannot decide",
            f"{below}; the two leading candidates are tied within the draws' Monte Carlo noise "
            f"(difference {p1 - p2:.2f} <= 1.96 x {noise:.2f})",
            *numbers,
        )
    return verdict("prefer", below, *numbers)


def monte_carlo_se(p1: float, p2: float, draws: int) -> float:
    """Monte Carlo SE of p1 - p2, two cell frequencies of one multinomial over ``draws`` draws."""
    return float(np.sqrt(max(p1 + p2 - (p1 - p2) ** 2, 0.0) / draws))
