"""The metric side of planning: a fitted joint law as a forecast M(N, D) of size N and training
examples D, from the fit stage's joint-protocol fits and the runs' token and step counts.

The metric may come from any fitted law over N and S, or over training FLOPs C (the broken neural
scaling law, seed 003 eq. 4), with C = 6 N tokens_per_example D as in the training sidecars. Only a
joint fit with status ``ok`` is a forecast: :func:`unusable_fit` says why another is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws import registry
from rerank_scaling.laws.forms import SCALES, Law
from rerank_scaling.laws.protocols import GROUP_KEYS
from rerank_scaling.records import metric_direction, metric_spec


@dataclass(frozen=True)
class MetricForecast:
    """A fitted law as a function of size N (parameters) and training examples D.

    S = D / examples_per_step / 1e3 on the fit's step axis (``examples_per_step`` = 1 when the fit
    used examples); C = 6 N tokens_per_example D / 1e12, the training sidecars' FLOPs.
    """

    law: Law
    params: np.ndarray
    sign: int  # +1: larger is better; -1: a loss
    examples_per_step: float = 1.0
    tokens_per_example: float = 1.0
    valid: tuple[float, float] = (-np.inf, np.inf)  # the metric's range; a law outside it is no forecast

    def variables(self, n: np.ndarray | float, d: np.ndarray | float) -> dict[str, np.ndarray]:
        n, d = np.broadcast_arrays(np.asarray(n, float), np.asarray(d, float))
        every = {
            "N": n / SCALES["N"],
            "S": d / self.examples_per_step / SCALES["S"],
            "C": 6.0 * n * self.tokens_per_example * d / SCALES["C"],
        }
        return {v: every[v] for v in self.law.variables}

    def __call__(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        """The law's prediction; NaN where it leaves the metric's range (e.g. a BNSL extrapolated
        far past its data can predict nDCG > 1)."""
        with np.errstate(all="ignore"):
            value = self.law.predict(np.asarray(self.params, float), self.variables(n, d))
        return np.where((value >= self.valid[0]) & (value <= self.valid[1]), value, np.nan)

    def utility(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        """sign x metric: larger is better; -inf where undefined (unaffordable or non-finite)."""
        value = self.sign * self(n, d)
        return np.where(np.isfinite(value), value, -np.inf)


@dataclass(frozen=True)
class RunStats:
    """What the training runs tell about the D <-> S and D <-> C conversions."""

    tokens_per_example: dict[tuple[str, str], float]  # (objective, attention) -> non-padding tokens
    examples_per_step: dict[tuple[str, str], float]
    default_tokens: float
    default_examples_per_step: float
    max_examples: float

    def tokens(self, objective: str, attention: str) -> float:
        return self.tokens_per_example.get((objective, attention), self.default_tokens)

    def per_step(self, objective: str, attention: str) -> float:
        return self.examples_per_step.get((objective, attention), self.default_examples_per_step)


def run_stats(metrics: pd.DataFrame, training: dict[str, Any]) -> RunStats:
    """Tokens per example and examples per step of each (objective, attention), from the sidecar columns."""
    runs = metrics[(metrics["family"] != "bm25") & (metrics["step"] > 0) & (metrics["examples"] > 0)]
    runs = runs.drop_duplicates(["run", "checkpoint"])
    tokens, per_step = {}, {}
    for (objective, attention), rows in runs.groupby(["objective", "attention"]):
        tokens[(objective, attention)] = float((rows["tokens"] / rows["examples"]).median())
        per_step[(objective, attention)] = float((rows["examples"] / rows["step"]).median())
    max_length = float(training.get("max_length", 256))
    batch = float(training.get("pointwise_batch_size", 16))
    return RunStats(
        tokens,
        per_step,
        float(np.median(list(tokens.values()))) if tokens else max_length,
        float(np.median(list(per_step.values()))) if per_step else batch,
        float(runs["examples"].max()) if len(runs) else 1000.0,
    )


def joint_fits(fits: pd.DataFrame) -> pd.DataFrame:
    """Rows of the joint protocol planning uses (empty, with the needed columns, when there are none).

    The fit stage fits two joint protocols (``joint_code``, ``joint_text``) and marks the one named by
    ``fitting.joint_protocol`` with ``planning = True``; tables without that column (older runs)
    have a single protocol ``joint``.
    """
    needed = [*GROUP_KEYS, "protocol", "law", "status", "reason", "params"]
    if fits.empty or any(c not in fits.columns for c in needed):
        return pd.DataFrame(columns=needed)
    if "planning" in fits.columns:
        chosen = fits["planning"].fillna(False).astype(bool)
        return fits[fits["protocol"].astype(str).str.startswith("joint") & chosen]
    return fits[fits["protocol"] == "joint"]


def law_for(name: str, metric: str) -> laws.Law:
    return registry.law(name, metric)


def metric_range(metric: str) -> tuple[float, float]:
    """Values a metric can take (:func:`rerank_scaling.records.metric_spec`, the one definition)."""
    return metric_spec(metric).range


def fit_forecast(fit: pd.Series, stats: RunStats, step_axis: str) -> MetricForecast:
    law = law_for(fit["law"], fit["metric"])
    params = json.loads(fit["params"])
    per_step = stats.per_step(fit["objective"], fit["attention"]) if step_axis == "step" else 1.0
    return MetricForecast(
        law,
        np.array([params[p] for p in law.params]),
        metric_direction(fit["metric"]),
        per_step,
        stats.tokens(fit["objective"], fit["attention"]),
        metric_range(fit["metric"]),
    )


def unusable_fit(fit: pd.DataFrame, law: str) -> tuple[str, str] | None:
    """None when ``fit`` (a group's rows of one law) holds a joint fit with status ``ok``; else the
    plan row's (status, reason): ``missing``, or the fit's own status (``degenerate``, ``failed``)
    with "not identifiable: <the fit's reason>" -- planning never optimises a degenerate law."""
    if fit.empty:
        return "missing", f"no {law} joint fit"
    status = str(fit["status"].iloc[0])
    if status == "ok":
        return None
    reason = fit["reason"].iloc[0]
    reason = reason if isinstance(reason, str) and reason else status
    prefix = "not identifiable: "
    return status, reason if reason.startswith(prefix) else prefix + reason
