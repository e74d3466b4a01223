"""Compute-optimal allocation from the additive joint law (Scaling Laws for Cross-Encoder Reranking eqs. 4-9).

With M = a - b N^(-gamma) - c D^(-delta) (gamma, delta: the fitted N and D exponents) and a compute
budget C = N * D, the metric gap b N^(-gamma) + c (C/N)^(-delta) is smallest where its derivative
in N vanishes: gamma b N^(-gamma-1) = delta c C^(-delta) N^(delta-1), hence

    N*(C) = (gamma b / (delta c))^(1/(gamma+delta)) * C^(delta/(gamma+delta))     (exponent alpha)
    D*(C) = C / N*(C) = (delta c / (gamma b))^(1/(gamma+delta)) * C^(gamma/(gamma+delta))  (beta)

so alpha = delta/(gamma+delta) and beta = gamma/(gamma+delta), alpha + beta = 1. D is the step axis
of the fit (``fitting.step_axis``: optimizer steps or training examples, the S the law was fitted
on), on the law's scale (N in millions, D in thousands); N is on the fit's size axis
(``fitting.size_axis``), the one planning's C uses too. The compute C = N D is in those units.

Only an identified fit (status ``ok``) yields an allocation: the rows of a degenerate or failed
joint fit carry its status and the reason "not identifiable: <reason>" and no N*(C), so no table
or figure shows an optimum drawn from a law that cannot see model size.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rerank_scaling.laws import registry
from rerank_scaling.laws.fit_settings import GROUP_KEYS
from rerank_scaling.laws.forms import SCALES

#: Below this N or D exponent the metric does not scale along that axis in the fitted range, and a
#: compute-optimal size is undefined (1/(gamma+delta) explodes): such fits get N* = NaN.
MIN_EXPONENT = 0.01


def optimal_size(b: float, gamma: float, c: float, delta: float, compute: np.ndarray) -> np.ndarray:
    """N*(C) of the additive law on the law's scale (eq. above), computed in log space.

    Exponents near zero make 1/(gamma+delta) huge; values beyond float range come back as NaN
    (no meaningful compute-optimal size), never as 0 or inf.
    """
    with np.errstate(all="ignore"):
        log_n = (np.log(gamma * b) - np.log(delta * c) + delta * np.log(np.asarray(compute, float))) / (
            gamma + delta
        )
        size = np.exp(log_n)
    return np.where(np.isfinite(size) & (size > 0), size, np.nan)


def allocation_exponents(gamma: float, delta: float) -> tuple[float, float]:
    """(alpha, beta): N* ~ C^alpha, D* ~ C^beta."""
    return delta / (gamma + delta), gamma / (gamma + delta)


def _fit_points(fit: pd.Series, forecasts: pd.DataFrame) -> pd.DataFrame:
    mask = (forecasts["law"] == registry.ADDITIVE) & (forecasts["split_label"] == fit["split_label"])
    for key in GROUP_KEYS:
        mask &= forecasts[key] == fit[key]
    return forecasts[mask]


def allocation_table(fits: pd.DataFrame, forecasts: pd.DataFrame, step_axis: str = "step") -> pd.DataFrame:
    """Per additive joint fit and checkpoint: exponents, N / N*(C) (C = N * D, D on ``step_axis``:
    the column ``step`` or ``examples`` of the forecasts, as the law was fitted), status and reason."""
    rows = []
    joint = fits[(fits["law"] == registry.ADDITIVE) & fits["protocol"].astype(str).str.startswith("joint")]
    for _, fit in joint.iterrows():
        points = _fit_points(fit, forecasts) if len(forecasts) else pd.DataFrame()
        keys = [*GROUP_KEYS, "model", "step", "examples", "size"]
        base = points[keys] if len(points) else pd.DataFrame([{k: fit.get(k) for k in GROUP_KEYS}])
        status, reason = fit["status"], fit["reason"]
        alpha = beta = np.nan
        n_star = np.full(len(base), np.nan)
        n = base["size"].to_numpy(float) / SCALES["N"] if "size" in base else np.full(len(base), np.nan)
        d = base[step_axis].to_numpy(float) / SCALES["S"] if step_axis in base else np.full(len(base), np.nan)
        if status == "ok":
            p = json.loads(fit["params"])
            alpha, beta = allocation_exponents(p["alpha"], p["beta"])
            if p["b"] > 0 and p["c"] > 0 and min(p["alpha"], p["beta"]) >= MIN_EXPONENT:
                n_star = optimal_size(p["b"], p["alpha"], p["c"], p["beta"], n * d)
            else:
                status, reason = "degenerate", f"an exponent below {MIN_EXPONENT} or a zero amplitude"
        if status != "ok" and not str(reason).startswith("not identifiable"):
            reason = f"not identifiable: {reason}"
        rows.append(
            base.assign(
                protocol=fit["protocol"],
                step_axis=step_axis,
                planning=bool(fit.get("planning", False)),
                status=status,
                reason=reason,
                compute=n * d,
                n_star=n_star * SCALES["N"],
                n_over_n_star=n / n_star,
                alpha=alpha,
                beta=beta,
            )
        )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def equal_compute(table: pd.DataFrame, small: str, large: str, step_axis: str = "step") -> pd.DataFrame:
    """Final checkpoint of ``small`` vs the checkpoint of ``large`` nearest in compute C = N * D."""
    rows = []
    data = table[table["model"].isin([small, large])]
    for keys, group in data.groupby(GROUP_KEYS[1:]):
        a, b = group[group["model"] == small], group[group["model"] == large]
        if a.empty or b.empty:
            continue
        final = a[a["step"] == a["step"].max()].iloc[0]
        budget = final["size"] * final[step_axis]
        match = b.iloc[(b["size"] * b[step_axis] - budget).abs().argsort().iloc[0]]
        rows.append(
            dict(zip(GROUP_KEYS[1:], keys, strict=True))
            | {
                "small": small,
                "small_step": final["step"],
                "small_value": final["value"],
                "large": large,
                "large_step": match["step"],
                "large_value": match["value"],
                "compute_ratio": match["size"] * match[step_axis] / budget,
                "difference": match["value"] - final["value"],
            }
        )
    return pd.DataFrame(rows)
