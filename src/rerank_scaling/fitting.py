"""One fitting routine for every law: bounded least squares from a grid of starts, best kept.

``loss="least_squares"`` minimises squared residuals of the metric; ``loss="huber_log"`` minimises
a Huber loss of log-residuals, log(prediction) - log(observation), as Hoffmann et al. (2022) do for
their compute-optimal fits (needs positive observations). Numerical failure never raises: the
result carries ``status="failed"`` and a reason, so one bad group cannot stop the workflow.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from rerank_scaling.laws import Law, Variables


@dataclass
class FitResult:
    law: str
    status: str  # "ok" | "failed"
    reason: str = ""
    params: np.ndarray = field(default_factory=lambda: np.array([]))
    n: int = 0
    cost: float = float("nan")

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _residuals(law: Law, x: Variables, y: np.ndarray, loss: str):
    if law.log_target:
        target = np.log(-np.log(y))
        return lambda p: law.function(p, x) - target
    if loss == "huber_log":
        return lambda p: np.log(np.clip(law.predict(p, x), 1e-12, None)) - np.log(y)
    return lambda p: law.predict(p, x) - y


def fit_law(
    law: Law,
    x: Variables,
    y: np.ndarray,
    loss: str = "least_squares",
    huber_delta: float = 1e-3,
    starts: list[np.ndarray] | None = None,
    max_evaluations: int = 2000,
) -> FitResult:
    """Fit ``law`` to observations ``y`` at ``x``; the best of all starts (lowest cost) is kept.

    ``max_evaluations`` caps the optimiser's function evaluations per start (bootstrap refits,
    which start at the original optimum, need far fewer than a fit from a grid start).
    """
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n <= len(law.params):
        return FitResult(law.name, "failed", f"{n} points for {len(law.params)} parameters", n=n)
    arrays = [np.asarray(x[v], dtype=float) for v in law.variables] + [y]
    if not all(np.isfinite(a).all() for a in arrays) or any(
        (np.asarray(x[v]) <= 0).any() for v in law.variables
    ):
        return FitResult(law.name, "failed", "non-finite observations or non-positive variables", n=n)
    if law.log_target and not ((y > 0) & (y < 1)).all():
        return FitResult(law.name, "failed", "the relative-based law needs 0 < RBP < 1", n=n)
    if loss == "huber_log" and (y <= 0).any():
        return FitResult(law.name, "failed", "huber_log needs positive observations", n=n)
    residual = _residuals(law, x, y, loss)
    lower, upper = np.array(law.lower), np.array(law.upper)
    best: FitResult | None = None
    for start in starts if starts is not None else law.starts():
        start = np.clip(start, lower + 1e-9 * np.isfinite(lower), upper - 1e-9 * np.isfinite(upper))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                solution = least_squares(
                    residual,
                    start,
                    bounds=(lower, upper),
                    max_nfev=max_evaluations,
                    loss="huber" if loss == "huber_log" else "linear",
                    f_scale=huber_delta,
                )
            except (ValueError, FloatingPointError, OverflowError):
                continue
        if np.isfinite(solution.cost) and (best is None or solution.cost < best.cost):
            best = FitResult(law.name, "ok", "", solution.x, n, float(solution.cost))
    if best is None:
        return FitResult(law.name, "failed", "the optimiser failed from every start", n=n)
    prediction = law.predict(best.params, x)
    if not np.isfinite(prediction).all():
        return FitResult(law.name, "failed", "non-finite predictions at the optimum", n=n)
    return best
