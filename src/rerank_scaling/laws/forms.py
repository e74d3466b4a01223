"""Scaling laws as small objects: name, formula, parameters, bounds and a grid of initial guesses.

Variables are passed as a dict of arrays: ``N`` (parameters, in millions), ``S`` (training steps
or examples, in thousands) and ``C`` (training FLOPs, in units of 1e12), so every law is fitted on
a well-conditioned scale; parameters are reported on that scale. ``sign`` is +1 for metrics where
larger is better (nDCG: saturating *upwards*) and -1 for losses (CE: decreasing towards a floor).

Forms ("Scaling Laws for Cross-Encoder Reranking", the core paper):

* power law in one variable, eqs. 1-2:      M = a - sign * b * x^(-c)
* additive joint law, eqs. 3/5:             M = a - sign * (b * N^(-alpha) + c * S^(-beta))
* multiplicative ablation, §6.2.4:          M = a + b * N^c * S^e
* Fang et al. ("Scaling Laws for Dense Retrieval"), for losses:
      L = (A/N)^alpha + delta,  L = (B/D)^beta + delta,  L = [(A/N)^(alpha/beta) + B/D]^beta + delta
* broken neural scaling law ("Scaling Laws for Online Advertisement Retrieval", eq. 4; Caballero et
  al. 2023), n breaks over FLOPs C:
      y = a - sign * b * C^(-c0) * prod_i (1 + (C/d_i)^(1/f_i))^(-c_i * f_i)
* log-linear (the curve every saturating law approaches before it bends): M = a + b ln x
* power law with its asymptote fixed at a ceiling (e.g. the oracle value of BM25's candidates):
      M = ceiling - sign * b * x^(-c)
* relative-based law ("Relative-Based Scaling Law for Neural Language Models"):
      -log RelP_k = (N0/N)^alpha, fitted as
      log(-log RelP_k) = alpha * log N0 - alpha * log N   (``log_target``)

Bounds. The asymptote ``a`` (and Fang et al.'s floor ``delta``) is bounded by the metric's range
(:func:`metric_range`: rank metrics in [0, 1] -- lowered to the reranking ceiling by
:func:`rerank_scaling.laws.registry.bounds_for` -- CE@k in [0, ln k]), as the paper's released fitting
code bounds it to [0, 1]; without it a saturating law can trade a huge asymptote against a tiny
exponent and become a log-linear curve in disguise (a = 51, c = 0.001). Exponents lie in [0, 5].
A fit that ends on a bound is not identified by the data (see :mod:`rerank_scaling.laws.identifiability`).
Every ``function`` broadcasts: parameters of shape (P, B) with variables of shape (n, 1) give (n, B)
predictions, which the batched bootstrap refits use.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rerank_scaling.registries.measures import metric_spec

Variables = dict[str, np.ndarray]
Range = tuple[float, float]
UNBOUNDED: Range = (-np.inf, np.inf)


def metric_range(metric: str) -> Range:
    """Values ``metric``'s expected value can take
    (:func:`~rerank_scaling.registries.measures.metric_spec`, the one definition): [0, 1] for
    rank metrics, [0, ln k] for contrastive entropy CE@k."""
    return metric_spec(metric).range


#: Units in which variables enter the laws (see module docstring).
SCALES = {"N": 1e6, "S": 1e3, "C": 1e12}


@dataclass(frozen=True)
class Law:
    """A parametric law ``M = f(params, variables)`` with bounds and a grid of starting points."""

    name: str
    formula: str
    variables: tuple[str, ...]
    params: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    start_grid: tuple[tuple[float, ...], ...]  # candidate values per parameter
    function: Callable[[np.ndarray, Variables], np.ndarray]
    log_target: bool = False  # fit log(-log y) instead of y (relative-based law)
    amplitudes: tuple[str, ...] = ()  # parameters whose value 0 removes a term (identifiability check)
    # distinct values each variable needs (identifiability check); default: p for a law in one
    # variable, 2 for each variable of a joint law
    min_levels: tuple[tuple[str, int], ...] = ()

    def predict(self, params: np.ndarray, x: Variables) -> np.ndarray:
        """The law's prediction of the metric itself (also for log-space laws)."""
        value = self.function(np.asarray(params, dtype=float), x)
        return np.exp(-np.exp(value)) if self.log_target else value

    def starts(self, limit: int = 24) -> list[np.ndarray]:
        """Initial guesses: the grid's Cartesian product, thinned evenly to at most ``limit``."""
        grid = [np.array(p, dtype=float) for p in itertools.product(*self.start_grid)]
        if len(grid) > limit:
            grid = [grid[i] for i in np.linspace(0, len(grid) - 1, limit).astype(int)]
        return grid


def positive_power(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """``x ** exponent`` for positive ``x`` (sizes, steps, FLOPs) as ``exp(exponent * log x)``,
    within an ulp of ``np.power``: the laws' x has one column and the exponent one value per refit,
    so the logarithm is taken of the n points only and one exponential per element remains, about
    half of ``np.power``'s time per element (the power law's evaluation was 44% of a bootstrap
    refit's time before, in tests/laws/test_fit_statistics.py's simulation)."""
    return np.exp(exponent * np.log(x))


def _power(sign: int, var: str) -> Callable[[np.ndarray, Variables], np.ndarray]:
    return lambda p, x: p[0] - sign * p[1] * positive_power(x[var], -p[2])


def _asymptote_starts(asymptote: Range, unbounded: tuple[float, ...]) -> tuple[float, ...]:
    """Starting values of an asymptote: inside its bounds when it has them."""
    lo, hi = asymptote
    if np.isfinite(lo) and np.isfinite(hi):
        return tuple(lo + (hi - lo) * q for q in (0.3, 0.6, 0.95))
    return unbounded


def power_law(var: str, sign: int, asymptote: Range = UNBOUNDED) -> Law:
    """Saturating power law in one variable (Scaling Laws for Cross-Encoder Reranking eqs. 1-2); ``asymptote``
    bounds ``a``."""
    label = "a - b x^{-c}" if sign > 0 else "a + b x^{-c}"
    return Law(
        f"power_{var}",
        label.replace("x", var),
        (var,),
        ("a", "b", "c"),
        (asymptote[0], 0.0, 0.0),
        (asymptote[1], np.inf, 5.0),
        (_asymptote_starts(asymptote, (0.0, 0.5, 1.0, 3.0)), (0.01, 0.1, 1.0), (0.1, 0.5, 1.5)),
        _power(sign, var),
        amplitudes=("b",),
    )


def log_linear_law(var: str) -> Law:
    """Log-linear in one variable, M = a + b ln x: no asymptote, the ensemble's unsaturated form."""
    return Law(
        f"log_linear_{var}",
        f"a + b ln {var}",
        (var,),
        ("a", "b"),
        (-np.inf, -np.inf),
        (np.inf, np.inf),
        ((0.0, 0.5), (-0.05, 0.05)),
        lambda p, x: p[0] + p[1] * np.log(x[var]),
    )


def ceiling_power_law(var: str, sign: int, ceiling: float) -> Law:
    """Saturating power law whose asymptote is fixed at ``ceiling`` (the metric's bound or the
    oracle value of the candidates): M = ceiling - sign * b * x^(-c)."""
    label = "ceiling - b x^{-c}" if sign > 0 else "ceiling + b x^{-c}"
    return Law(
        f"power_{var}_ceiling",
        label.replace("x", var),
        (var,),
        ("b", "c"),
        (0.0, 0.0),
        (np.inf, 5.0),
        ((0.01, 0.1, 1.0), (0.05, 0.2, 0.5, 1.5)),
        lambda p, x: ceiling - sign * p[0] * positive_power(x[var], -p[1]),
        amplitudes=("b",),
    )


def additive_law(sign: int, asymptote: Range = UNBOUNDED) -> Law:
    """Additive joint law in N and S (Scaling Laws for Cross-Encoder Reranking eqs. 3/5); ``asymptote`` bounds
    ``a``."""

    def f(p: np.ndarray, x: Variables) -> np.ndarray:
        return p[0] - sign * (p[1] * positive_power(x["N"], -p[2]) + p[3] * positive_power(x["S"], -p[4]))

    label = "a - b N^{-alpha} - c S^{-beta}" if sign > 0 else "a + b N^{-alpha} + c S^{-beta}"
    return Law(
        "additive",
        label,
        ("N", "S"),
        ("a", "b", "alpha", "c", "beta"),
        (asymptote[0], 0.0, 0.0, 0.0, 0.0),
        (asymptote[1], np.inf, 5.0, np.inf, 5.0),
        (_asymptote_starts(asymptote, (0.0, 1.0, 3.0)), (0.01, 0.1), (0.2, 1.0), (0.01, 0.1), (0.2, 1.0)),
        f,
        amplitudes=("b", "c"),
        # a - b N^-alpha at two sizes is two numbers for three unknowns (a trades against b, alpha):
        # a joint fit on two sizes is exactly unidentified in N, however many steps it has
        min_levels=(("N", 3), ("S", 3)),
    )


def multiplicative_law(asymptote: Range = UNBOUNDED) -> Law:
    """Multiplicative ablation (Scaling Laws for Cross-Encoder Reranking §6.2.4): M = a + b N^c S^e;
    ``asymptote`` bounds ``a``."""
    return Law(
        "multiplicative",
        "a + b N^{c} S^{e}",
        ("N", "S"),
        ("a", "b", "c", "e"),
        (asymptote[0], -np.inf, -5.0, -5.0),
        (asymptote[1], np.inf, 5.0, 5.0),
        (_asymptote_starts(asymptote, (0.0, 1.0, 3.0)), (-0.1, 0.1), (-0.5, 0.5), (-0.5, 0.5)),
        lambda p, x: p[0] + p[1] * positive_power(x["N"], p[2]) * positive_power(x["S"], p[3]),
        amplitudes=("b",),
    )


def fang_law(var: str, floor: Range = (0.0, np.inf)) -> Law:
    """Fang et al. (Scaling Laws for Dense Retrieval): L(x) = (A/x)^alpha + delta, for losses; ``floor``
    bounds delta."""
    return Law(
        f"fang_{var}",
        f"(A/{var})^{{alpha}} + delta",
        (var,),
        ("A", "alpha", "delta"),
        (1e-9, 0.0, floor[0]),
        (np.inf, 5.0, floor[1]),
        ((0.01, 0.1, 1.0), (0.1, 0.5, 1.0), _asymptote_starts(floor, (0.0, 1.0, 3.0))),
        lambda p, x: (p[0] / x[var]) ** p[1] + p[2],
    )


def fang_joint_law(floor: Range = (0.0, np.inf)) -> Law:
    """Fang et al. (Scaling Laws for Dense Retrieval) joint: L = [(A/N)^(alpha/beta) + B/D]^beta + delta;
    ``floor`` bounds delta."""

    def f(p: np.ndarray, x: Variables) -> np.ndarray:
        return ((p[0] / x["N"]) ** (p[1] / p[3]) + p[2] / x["S"]) ** p[3] + p[4]

    return Law(
        "fang_joint",
        "[(A/N)^{alpha/beta} + B/S]^{beta} + delta",
        ("N", "S"),
        ("A", "alpha", "B", "beta", "delta"),
        (1e-9, 0.01, 1e-9, 0.01, floor[0]),
        (np.inf, 5.0, np.inf, 5.0, floor[1]),
        ((0.1, 1.0), (0.2, 0.6), (0.001, 0.01), (0.2, 0.6), _asymptote_starts(floor, (0.0, 2.0))),
        f,
    )


def bnsl_law(breaks: int, sign: int, asymptote: Range = UNBOUNDED) -> Law:
    """Broken neural scaling law with ``breaks`` breaks over FLOPs C (Caballero et al. 2023)."""

    def f(p: np.ndarray, x: Variables) -> np.ndarray:
        value = p[1] * positive_power(x["C"], -p[2])
        for i in range(breaks):
            c, d, g = p[3 + 3 * i : 6 + 3 * i]
            value = value * (1 + (x["C"] / d) ** (1 / g)) ** (-c * g)
        return p[0] - sign * value

    names = ("a", "b", "c0") + tuple(f"{k}{i + 1}" for i in range(breaks) for k in ("c", "d", "f"))
    lower = (asymptote[0], 0.0, -2.0) + (-2.0, 1e-6, 0.01) * breaks
    upper = (asymptote[1], np.inf, 2.0) + (2.0, 1e6, 5.0) * breaks
    grid = ((_asymptote_starts(asymptote, (0.0, 1.0, 3.0))), (0.1, 1.0), (0.0, 0.3)) + (
        (0.0, 0.5),
        (0.1, 1.0, 10.0),
        (0.3, 1.0),
    ) * breaks
    return Law(
        f"bnsl{breaks}",
        "a - b C^{-c0} prod_i (1 + (C/d_i)^{1/f_i})^{-c_i f_i}",
        ("C",),
        names,
        lower,
        upper,
        grid,
        f,
        amplitudes=("b",),
    )


def relative_law() -> Law:
    """Relative-based law ("Relative-Based Scaling Law for Neural Language Models"):
    -log RelP_k = (N0/N)^alpha, linear in log space."""
    return Law(
        "relative",
        "-log RelP = (N0/N)^{alpha}",
        ("N",),
        ("N0", "alpha"),
        (1e-9, 0.0),
        (np.inf, 5.0),
        ((0.1, 1.0, 10.0), (0.1, 0.5, 1.0)),
        lambda p, x: p[1] * np.log(p[0]) - p[1] * np.log(x["N"]),
        log_target=True,
    )
