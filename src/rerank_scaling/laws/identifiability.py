"""Is a fitted law identified by its data? Reasons a fit is ``degenerate`` rather than ``ok``.

A least-squares optimum can be numerically sound and still mean nothing: an asymptote of
51 with an exponent of 0.001 is a log-linear curve in disguise, and a size term with amplitude 1e-28
says the data cannot see model size. Three checks, in the spirit of the warnings of
`simple-scaling-laws` (weakly identified exponents, parameters pinned to a bound):

0. too few distinct values of a variable: a law in one variable with p parameters needs p distinct
   values of it (3 sizes for a - b N^-c); a joint law needs 2 of each, or what it declares
   (``Law.min_levels``: the additive law needs 3 sizes, since a - b N^-alpha at two sizes leaves a,
   b and alpha trading exactly); bootstrap refits started at the optimum cannot reveal an exactly
   flat direction, so this is counted, not sampled;
1. a parameter ends on one of its finite bounds (the optimum lies outside the admissible region);
2. a term is flat: setting its amplitude (``Law.amplitudes``) to zero changes the fitted curve over
   the fitted points by less than ``FLAT_TERM`` of the data's range;
3. a parameter's bootstrap spread is too large for its kind (:func:`wide_spreads`): an exponent's
   exceeds |value| (a "t-ratio" below 1), a level's exceeds a quarter of its admissible range.

Each returns a readable reason; :func:`degenerate_reasons` joins them ("" when the fit is identified).
"""

from __future__ import annotations

import numpy as np

from rerank_scaling.laws.forms import Law, Variables

#: Relative distance to a bound (of the bound's magnitude, at least 1e-9 absolute) that counts as "on it".
ON_BOUND = 1e-6
#: A term whose removal moves the fitted curve by less than this fraction of the data's range is flat.
FLAT_TERM = 0.01


def too_few_levels(law: Law, x: Variables) -> list[str]:
    """Variables with fewer distinct values than the law needs to identify its parameters."""
    default = len(law.params) if len(law.variables) == 1 else 2
    reasons = []
    for name in law.variables:
        needed = dict(law.min_levels).get(name, default)
        levels = len(np.unique(np.asarray(x[name], float)))
        if levels < needed:
            reasons.append(f"{levels} distinct {name} for a law that needs {needed}")
    return reasons


def on_bounds(law: Law, params: np.ndarray) -> list[str]:
    """Parameters that ended on a finite bound."""
    reasons = []
    for name, value, lo, hi in zip(law.params, params, law.lower, law.upper, strict=True):
        for bound, side in ((lo, "lower"), (hi, "upper")):
            if np.isfinite(bound) and abs(value - bound) <= ON_BOUND * max(abs(bound), 1e-3):
                reasons.append(f"{name} = {value:.3g} on its {side} bound")
    return reasons


def flat_terms(law: Law, params: np.ndarray, x: Variables, y: np.ndarray) -> list[str]:
    """Terms whose amplitude is effectively zero over the fitted points."""
    span = float(np.ptp(y)) if len(y) else 0.0
    if span <= 0:
        return []
    base = law.predict(params, x)
    reasons = []
    for name in law.amplitudes:
        without = np.array(params, dtype=float)
        without[law.params.index(name)] = 0.0
        with np.errstate(all="ignore"):
            variation = float(np.ptp(base - law.predict(without, x)))
        # A term that is constant over the data is absorbed by the asymptote: what matters is how
        # much it varies across the fitted points, not its level.
        if not np.isfinite(variation) or variation < FLAT_TERM * span:
            reasons.append(f"term of {name} = {params[law.params.index(name)]:.3g} is flat over the data")
    return reasons


#: Parameters that set a law's level (its asymptote or floor), by name across the forms.
LEVEL_PARAMS = ("a", "delta")
#: A level whose bootstrap spread exceeds this fraction of its admissible range is not identified.
LEVEL_SPREAD = 0.25


def wide_spreads(law: Law, params: np.ndarray, refits: np.ndarray) -> list[str]:
    """Parameters the bootstrap refits (B, P) do not determine, judged on a scale each one has:

    * an exponent (unitless): its robust spread (q84 - q16)/2 exceeds |value| (a t-ratio below 1);
    * a level (asymptote ``a`` or floor ``delta``): its spread exceeds ``LEVEL_SPREAD`` of the range
      its bounds allow (a CE floor near 0 is not "wide" merely because |value| is tiny);
    * an amplitude is not judged here: its size depends on the units of the variables (b N^-c with
      N in millions or in units), and :func:`flat_terms` already asks whether its term matters.
    """
    if len(refits) < 2:
        return []
    spread = (np.percentile(refits, 84, axis=0) - np.percentile(refits, 16, axis=0)) / 2
    reasons = []
    for name, value, sd, lo, hi in zip(law.params, params, spread, law.lower, law.upper, strict=True):
        if not np.isfinite(sd) or name in law.amplitudes:
            continue
        if name in LEVEL_PARAMS:
            if np.isfinite(lo) and np.isfinite(hi) and sd > LEVEL_SPREAD * (hi - lo):
                reasons.append(
                    f"{name} = {value:.3g} not identified (spread {sd:.3g} of a range {hi - lo:.3g})"
                )
        elif sd > abs(value):
            reasons.append(f"{name} = {value:.3g} has bootstrap spread {sd:.3g} larger than itself")
    return reasons


def degenerate_reasons(
    law: Law,
    params: np.ndarray,
    x: Variables,
    y: np.ndarray,
    refits: np.ndarray | None = None,
) -> str:
    """All reasons the fit is not identified, joined by "; " ("" when there are none)."""
    reasons = too_few_levels(law, x) + on_bounds(law, params) + flat_terms(law, params, x, y)
    if refits is not None:
        reasons += wide_spreads(law, params, refits)
    return "; ".join(reasons)
