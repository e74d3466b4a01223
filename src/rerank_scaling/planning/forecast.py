"""The metric side of planning: a fitted joint law as a forecast M(N, D) of size N and training
examples D, from the fit stage's joint-protocol fits and the runs' token and step counts.

The metric may come from any fitted law over N and S, or over training FLOPs C (the broken neural
scaling law, Scaling Laws for Online Advertisement Retrieval eq. 4, fitted on converged models:
:mod:`rerank_scaling.laws.converged`), with C = 6 N tokens_per_example D as in the training sidecars. A
forecast carries the fit's bootstrap refits (``params_draws`` of fits.parquet) and the range it may be used in
(:class:`ValidatedRange`): outside it the forecast is NaN, so no curve, optimum or decision reaches beyond
what the rolling- origin backtests validated. A fit whose parameters are not identified (status
``degenerate``) is still a forecast: it is judged on its draws (forecast_status judges forecasts, not
parameters); only a missing or failed fit is not (:func:`unusable_fit`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws import registry
from rerank_scaling.laws.converged import converged_split
from rerank_scaling.laws.fit_settings import GROUP_KEYS, FitSettings
from rerank_scaling.laws.fitting import predict_batch
from rerank_scaling.laws.forms import SCALES, Law
from rerank_scaling.laws.protocols import prepare, splits_for
from rerank_scaling.registries.measures import metric_direction


@dataclass(frozen=True)
class ValidatedRange:
    """Where a forecast may be used: each law variable's fitted span [low, high] (law scale),
    stretched by the extrapolation ratio the backtests validated.

    ``ratio`` is the fit's ``validated_ratio`` (:func:`rerank_scaling.laws.forecast_status.validated_ratio`
    or ``fitting.validated_ratio``): the same number that makes a held-out forecast
    ``beyond_validated_range``. The extrapolation of a point is max(1, x / high, low / x) over the
    law's variables: forecast_status's x / x_max(fit), and below the smallest fitted value too
    (a budget can buy fewer examples than any fitted checkpoint saw).
    """

    low: dict[str, float]
    high: dict[str, float]
    ratio: float

    def extrapolation(self, x: dict[str, np.ndarray]) -> np.ndarray:
        ratio = np.ones(np.shape(next(iter(x.values()))))
        with np.errstate(all="ignore"):
            for v, values in x.items():
                ratio = np.maximum(ratio, np.maximum(values / self.high[v], self.low[v] / values))
        return np.where(np.isfinite(ratio), ratio, np.inf)

    def inside(self, x: dict[str, np.ndarray]) -> np.ndarray:
        return self.extrapolation(x) <= self.ratio * (1 + 1e-9)


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
    valid: tuple[float, float] = (-np.inf, np.inf)  # the metric's bounds; forecasts are clipped to them
    draws: np.ndarray | None = None  # (B, P) bootstrap refits of the parameters
    validated: ValidatedRange | None = None  # None: no range restriction (tests of the optimisers)

    def variables(self, n: np.ndarray | float, d: np.ndarray | float) -> dict[str, np.ndarray]:
        n, d = np.broadcast_arrays(np.asarray(n, float), np.asarray(d, float))
        every = {
            "N": n / SCALES["N"],
            "S": d / self.examples_per_step / SCALES["S"],
            "C": 6.0 * n * self.tokens_per_example * d / SCALES["C"],
        }
        return {v: every[v] for v in self.law.variables}

    def extrapolation(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        """How far (N, D) lies outside the fitted points (:meth:`ValidatedRange.extrapolation`; 1
        without a range)."""
        x = self.variables(n, d)
        return (
            self.validated.extrapolation(x) if self.validated else np.ones(np.shape(x[self.law.variables[0]]))
        )

    def _checked(
        self, value: np.ndarray, n: np.ndarray | float, d: np.ndarray | float, extrapolate: bool = False
    ) -> np.ndarray:
        """``value`` clipped to the metric's bounds, NaN outside the validated range (unless
        ``extrapolate``: a decision's draws, flagged by their extrapolation ratio instead)."""
        value = np.clip(value, *self.valid)
        if self.validated is not None and not extrapolate:
            value = np.where(self.validated.inside(self.variables(n, d)), value, np.nan)
        return value

    def __call__(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        """The law's prediction, NaN outside the validated range. A value beyond the metric's bounds
        (:func:`~rerank_scaling.laws.registry.bounds_for`: its range, a rank metric's upper end lowered
        to the reranking ceiling of the candidates) is clipped to them: nDCG@10 of a reranker of
        BM25's top k cannot exceed the oracle ordering's, and a CE@k forecast above ln k is no better
        than a uniform scorer's (an under-trained small model sits there; dropping such draws would
        bias P(best) towards the draws that forecast it well)."""
        with np.errstate(all="ignore"):
            value = self.law.predict(np.asarray(self.params, float), self.variables(n, d))
        return self._checked(value, n, d)

    def sample(self, n: np.ndarray | float, d: np.ndarray | float, extrapolate: bool = False) -> np.ndarray:
        """(B, m) predictions of the bootstrap refits at the m points (n, d), NaN as in __call__
        (``extrapolate``: also beyond the validated range); shape (0, m) without draws."""
        x = self.variables(n, d)
        m = np.shape(x[self.law.variables[0]])[0] if np.ndim(x[self.law.variables[0]]) else 1
        if self.draws is None or not len(self.draws):
            return np.empty((0, m))
        x = {v: np.atleast_1d(values) for v, values in x.items()}
        value = predict_batch(self.law, self.draws, x)
        return self._checked(value, np.atleast_1d(n), np.atleast_1d(d), extrapolate)

    def utility(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        """sign x metric: larger is better; -inf where undefined (unaffordable or non-finite)."""
        value = self.sign * self(n, d)
        return np.where(np.isfinite(value), value, -np.inf)


#: Joint forms whose draws a decision mixes (:class:`FormMixture`): laws in (N, S) only. The BNSL
#: over FLOPs is left out: every candidate spending a whole budget has the same C, so it ties them all.
DECISION_FORMS = registry.DECISION_FORMS


@dataclass(frozen=True)
class FormMixture:
    """Form uncertainty in a decision: an equal-weight mixture of the joint forms'
    bootstrap draws, the same number from each (as :mod:`rerank_scaling.laws.ensemble` mixes the
    model law's forms). The forms are fitted on the same points, so the first member's validated
    range, sign and step conversion are every member's. :meth:`sample` is what a decision reads;
    optima and curves keep using the planning law's central fit."""

    members: tuple[MetricForecast, ...]
    names: tuple[str, ...]

    @property
    def sign(self) -> int:
        return self.members[0].sign

    @property
    def examples_per_step(self) -> float:
        return self.members[0].examples_per_step

    @property
    def validated(self) -> ValidatedRange | None:
        return self.members[0].validated

    def extrapolation(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        return self.members[0].extrapolation(n, d)

    def sample(self, n: np.ndarray | float, d: np.ndarray | float, extrapolate: bool = False) -> np.ndarray:
        """(B, m): the members' draws, truncated to the fewest any member has, stacked."""
        draws = [member.sample(n, d, extrapolate) for member in self.members]
        count = min(len(x) for x in draws)
        return np.vstack([x[:count] for x in draws])


def form_mixture(
    group: pd.DataFrame,
    primary: MetricForecast,
    stats: RunStats,
    fitting: FitSettings,
    points: pd.DataFrame | None,
) -> FormMixture:
    """The planning law's forecast (``primary``, the additive law's) mixed with every other usable
    joint form of :data:`DECISION_FORMS` in ``group`` (fits rows of one group) that has draws."""
    members, names = [primary], [DECISION_FORMS[0]]
    for name in DECISION_FORMS[1:]:
        fit = group[group["law"] == name]
        if unusable_fit(fit, name) is not None or not isinstance(fit.iloc[0].get("params_draws"), str):
            continue
        members.append(fit_forecast(fit.iloc[0], stats, fitting, points))
        names.append(name)
    return FormMixture(tuple(members), tuple(names))


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
    max_length = float(training["max_length"])
    batch = float(training["pointwise_batch_size"])
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


def _ceiling(fit: pd.Series) -> float | None:
    """The reranking ceiling the fit stage bounded the group by (fits column ``ceiling``), if any."""
    value = fit.get("ceiling")
    return float(value) if value is not None and np.isfinite(value) else None


def law_for(name: str, metric: str) -> laws.Law:
    return registry.law(name, metric)


def fit_points(metrics: pd.DataFrame, fitting: FitSettings) -> dict[tuple[Any, ...], pd.DataFrame]:
    """Per group (GROUP_KEYS values): the prepared points (N, S, C on the law scale) of the joint
    protocol planning uses, with its fitted rows marked (column ``fitted``)."""
    data = prepare(metrics, fitting)
    protocol = f"joint_{fitting.joint_protocol}"
    groups = {}
    for values, group in data.groupby(GROUP_KEYS):
        for _, fit_rows, _ in splits_for(protocol, group, fitting):
            groups[tuple(values)] = group.assign(fitted=group.index.isin(fit_rows.index))
    return groups


def validated_range(
    fit: pd.Series, law: Law, points: pd.DataFrame | None, fitting: FitSettings
) -> ValidatedRange | None:
    """The range a fit's forecast may be used in, from the points it was fitted on (the BNSL's:
    converged ones) and its ``validated_ratio`` (else ``fitting.validated_ratio``, else 1)."""
    if points is None or points.empty:
        return None
    fitted = points[points["fitted"]]
    rows, _ = converged_split(law, points, fitted, points.iloc[:0])
    if rows.empty:
        return None
    ratio = fit.get("validated_ratio")
    if ratio is None or not np.isfinite(ratio):
        ratio = fitting.validated_ratio or 1.0
    low = {v: float(rows[v].min()) for v in law.variables}
    high = {v: float(rows[v].max()) for v in law.variables}
    return ValidatedRange(low, high, float(ratio))


def fit_forecast(
    fit: pd.Series, stats: RunStats, fitting: FitSettings, points: pd.DataFrame | None = None
) -> MetricForecast:
    """A fits.parquet row as a forecast, with its bootstrap draws (``params_draws``, when stored)
    and, given the group's ``points`` (:func:`fit_points`), its validated range."""
    law = law_for(fit["law"], fit["metric"])
    params = json.loads(fit["params"])
    per_step = stats.per_step(fit["objective"], fit["attention"]) if fitting.step_axis == "step" else 1.0
    stored = fit.get("params_draws")
    draws = (
        np.array(json.loads(stored), float).reshape(-1, len(law.params)) if isinstance(stored, str) else None
    )
    return MetricForecast(
        law,
        np.array([params[p] for p in law.params]),
        metric_direction(fit["metric"]),
        per_step,
        stats.tokens(fit["objective"], fit["attention"]),
        registry.bounds_for(fit["metric"], _ceiling(fit)),
        draws,
        validated_range(fit, law, points, fitting),
    )


def unusable_fit(fit: pd.DataFrame, law: str) -> tuple[str, str] | None:
    """None when ``fit`` (a group's rows of one law) holds a fitted joint law (status ``ok``, or
    ``degenerate``: parameters not identified, the forecast judged on its draws); else the plan
    row's (status, reason): ``missing``, or ``failed`` with the fit's reason."""
    if fit.empty:
        return "missing", f"no {law} joint fit"
    status = str(fit["status"].iloc[0])
    if status in ("ok", "degenerate"):
        return None
    reason = fit["reason"].iloc[0]
    return status, reason if isinstance(reason, str) and reason else status
