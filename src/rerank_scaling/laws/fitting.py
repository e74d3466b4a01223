"""One fitting routine for every law: bounded least squares from a grid of starts, best kept.

``loss="least_squares"`` minimises squared residuals of the metric; ``loss="huber_log"`` minimises
a Huber loss of log-residuals, log(prediction) - log(observation), as Hoffmann et al. (2022) do for
their compute-optimal fits (needs positive observations). Numerical failure never raises: the
result carries ``status="failed"`` and a reason, so one bad group cannot stop the workflow.

Bootstrap refits go through :func:`refit_multistart`: a projected Levenberg-Marquardt iteration
(:func:`refit_batch`) run on all resamples at once (one broadcast law evaluation per parameter per
iteration, batched P x P solves), from the original optimum and a few grid starts, lowest cost kept.
It replaces hundreds of scipy calls per fit.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from rerank_scaling.laws.forms import Law, Variables


@dataclass
class FitResult:
    law: str
    status: str  # "ok" | "degenerate" | "failed"
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
        return FitResult(law.name, "failed", "the relative-based law needs 0 < RelP < 1", n=n)
    if loss == "huber_log" and (y <= 0).any():
        return FitResult(law.name, "failed", "huber_log needs positive observations", n=n)
    residual = _residuals(law, x, y, loss)
    lower, upper = np.array(law.lower), np.array(law.upper)
    best: FitResult | None = None
    candidates = starts if starts is not None else law.starts()
    if loss == "least_squares" and len(candidates) > 1:
        # every grid start at once (batched LM), then one scipy polish from the best of them
        grid = np.clip(
            np.array(candidates), lower + 1e-9 * np.isfinite(lower), upper - 1e-9 * np.isfinite(upper)
        )
        found, converged = refit_batch(law, x, np.repeat(y[:, None], len(grid), axis=1), grid, iterations=60)
        with np.errstate(all="ignore"):
            costs = np.where(converged, ((predict_batch(law, found, x) - y) ** 2).sum(1), np.inf)
            if law.log_target:
                costs = np.where(
                    converged,
                    ((law.function(found.T, _column(x, law)).T - np.log(-np.log(y))) ** 2).sum(1),
                    np.inf,
                )
        costs = np.where(np.isfinite(costs), costs, np.inf)
        if np.isfinite(costs).any():
            # the polish starts at a converged LM point: a few hundred evaluations suffice
            candidates, max_evaluations = [found[int(np.argmin(costs))]], min(max_evaluations, 300)
    for start in candidates:
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


def _batch_target(law: Law, y: np.ndarray) -> np.ndarray:
    return np.log(-np.log(y)) if law.log_target else y


def _batch_residuals(law: Law, x: Variables, target: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Residuals (n, B) of ``params`` (P, B) against ``target`` (n, B)."""
    with np.errstate(all="ignore"):
        return law.function(params, x) - target


def forward_jacobian(
    law: Law, x: Variables, target: np.ndarray, params: np.ndarray, residual: np.ndarray
) -> np.ndarray:
    """Forward-difference Jacobians (B, P, n) of the residuals (n, B) at ``params`` (P, B), each
    parameter moved by 1e-6 of its size (at least 1e-9).

    The P moved parameter sets are evaluated side by side in one call of the (element-wise) law,
    the same numbers as one call per parameter at a P-th of the calls; the result is in C order,
    the layout the normal equations' matrix products sum in (another layout sums in another order
    and moves the fits by rounding)."""
    size, n = len(params), len(target)
    step = 1e-6 * np.maximum(np.abs(params), 1e-3)
    moved = np.repeat(params[:, None, :], size, axis=1)  # moved[:, i, :]: params with row i moved
    moved[np.arange(size), np.arange(size)] += step
    shifted = _batch_residuals(law, x, np.tile(target, size), moved.reshape(size, -1)).reshape(n, size, -1)
    return np.ascontiguousarray(((shifted - residual[:, None, :]) / step).transpose(2, 1, 0))


def solve_each(system: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``system[k] @ out[k] = rhs[k]`` for a stack of square systems (LAPACK's solver, one system
    at a time, the same numbers as a batched call); a singular system (a parameter without effect
    on the curve) takes its pseudo-inverse's solution, the others keep theirs, so one column's
    step never depends on which other columns share its batch."""
    try:
        return np.linalg.solve(system, rhs)
    except np.linalg.LinAlgError:
        out = np.empty(np.broadcast_shapes(rhs.shape, system.shape[:-1] + rhs.shape[-1:]))
        for k in range(len(system)):
            try:
                out[k] = np.linalg.solve(system[k], rhs[k])
            except np.linalg.LinAlgError:
                out[k] = np.linalg.pinv(system[k]) @ rhs[k]
        return out


def refit_batch(
    law: Law,
    x: Variables,
    y: np.ndarray,
    start: np.ndarray,
    iterations: int = 40,
    stopped: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares refits of ``law`` to every column of ``y`` (n, B), started at ``start``
    (one parameter vector (P,) for all columns, or one row per column (B, P)).

    Projected Levenberg-Marquardt (Marquardt 1963): per column, the step solves
    (J^T J + lambda diag(J^T J)) delta = -J^T r with a forward-difference Jacobian, is clipped to
    the bounds, and is kept only when it lowers the cost (lambda shrinks, else grows).
    Returns (params (B, P), converged (B,)): columns whose cost is not finite are not converged.
    ``stopped`` (B,), when given, is filled with whether each column stopped by the improvement
    criterion rather than the iteration cap (see :func:`refit_multistart`).
    """
    y = np.asarray(y, float)
    n, batch = y.shape
    columns = _column(x, law)
    lower, upper = np.array(law.lower)[:, None], np.array(law.upper)[:, None]
    start = np.asarray(start, float)
    params = np.array(start.T if start.ndim == 2 else np.repeat(start[:, None], batch, axis=1))
    size = params.shape[0]
    target = _batch_target(law, y)
    residual = _batch_residuals(law, columns, target, params)
    cost = np.where(np.isfinite(residual).all(0), (residual**2).sum(0), np.inf)
    damping = np.full(batch, 1e-3)
    active = np.isfinite(cost)
    eye = np.eye(size)
    for _ in range(iterations):
        # only the columns still moving: converged ones drop out of the batch
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        p, r, t, lam = params[:, idx], residual[:, idx], target[:, idx], damping[idx]
        jacobian = forward_jacobian(law, columns, t, p, r)
        jacobian[~np.isfinite(jacobian)] = 0.0
        normal = jacobian @ jacobian.transpose(0, 2, 1)
        gradient = (jacobian @ r.T[:, :, None])[:, :, 0]
        diagonal = normal[:, np.arange(size), np.arange(size)]
        system = normal + lam[:, None, None] * (diagonal[:, :, None] * eye + 1e-12 * eye)
        delta = solve_each(system, -gradient[:, :, None])[:, :, 0].T
        trial = np.clip(p + delta, lower, upper)
        trial_residual = _batch_residuals(law, columns, t, trial)
        trial_cost = np.where(np.isfinite(trial_residual).all(0), (trial_residual**2).sum(0), np.inf)
        old = cost[idx]
        better = trial_cost < old
        params[:, idx] = np.where(better, trial, p)
        residual[:, idx] = np.where(better, trial_residual, r)
        cost[idx] = np.where(better, trial_cost, old)
        damping[idx] = np.where(better, lam / 3, lam * 4)
        small = better & (old - trial_cost <= 1e-10 * np.maximum(old, 1e-30))
        active[idx] = ~(small | (damping[idx] > 1e10))
    if stopped is not None:
        stopped[:] = np.isfinite(cost) & ~active  # stopped by the criterion, not by the iteration cap
    return params.T, np.isfinite(cost)


#: Grid starts tried besides the original optimum by :func:`refit_multistart`.
REFIT_STARTS = 4
#: LM iterations of a bootstrap refit from each start.
REFIT_ITERATIONS = 150


def refit_multistart(
    law: Law, x: Variables, y: np.ndarray, optimum: np.ndarray, starts: int = REFIT_STARTS
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap refits that converge: every column of ``y`` (n, B) is refitted from the original
    ``optimum`` and from ``starts`` points of the law's start grid, and the lowest cost is kept.

    A refit started only at the original optimum and stopped after a fixed number of iterations
    can sit in the optimum's basin although the resample's own optimum lies elsewhere; the
    refits' spread is then too small and so are the intervals (Besiroglu et al. 2024 found this
    in the Chinchilla fits). Returns (params (B, P), converged (B,)): converged means the kept
    refit stopped by the improvement criterion (not the iteration cap) at a finite cost.
    """
    y = np.asarray(y, float)
    lower, upper = np.array(law.lower), np.array(law.upper)
    inside = lower + 1e-9 * np.isfinite(lower), upper - 1e-9 * np.isfinite(upper)
    candidates = [np.asarray(optimum, float)] + [np.clip(s, *inside) for s in law.starts(starts)]
    batch = y.shape[1]
    best_params = np.full((batch, len(law.params)), np.nan)
    best_cost = np.full(batch, np.inf)
    best_stopped = np.zeros(batch, bool)
    # every start's refits in one batch (block s: start s for every column): each column's LM path
    # is its own, so this is the per-start refits' result at the loop overhead of one
    rows = np.repeat(np.stack(candidates), batch, axis=0)
    stopped = np.zeros(len(rows), bool)
    params, finite = refit_batch(law, x, np.tile(y, len(candidates)), rows, REFIT_ITERATIONS, stopped)
    residual = _batch_residuals(
        law, _column(x, law), np.tile(_batch_target(law, y), len(candidates)), params.T
    )
    with np.errstate(all="ignore"):
        cost = np.where(finite & np.isfinite(residual).all(0), (residual**2).sum(0), np.inf)
    for block in range(len(candidates)):  # in the starts' order: the first of equal costs is kept
        at = slice(block * batch, (block + 1) * batch)
        better = cost[at] < best_cost * (1 - 1e-12)
        best_params[better], best_cost[better] = params[at][better], cost[at][better]
        best_stopped[better] = stopped[at][better]
    return best_params, np.isfinite(best_cost) & best_stopped


def _column(x: Variables, law: Law) -> Variables:
    return {v: np.asarray(x[v], float).reshape(-1, 1) for v in law.variables}


def predict_batch(law: Law, params: np.ndarray, x: Variables) -> np.ndarray:
    """Predictions (B, n) of parameter rows ``params`` (B, P) at ``x`` in one broadcast call."""
    params = np.asarray(params, float)
    if not len(params):
        return np.empty((0, len(next(iter(x.values())))))
    with np.errstate(all="ignore"):
        return np.asarray(law.predict(params.T, _column(x, law))).T
