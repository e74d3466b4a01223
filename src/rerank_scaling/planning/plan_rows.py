"""From fitted laws to decisions: budget allocation (seed 001 eq. 11) and ROI-constrained choice
(seed 003 eqs. 5-6). Pure numpy on a fitted law's parameters and a cost model.

Cost of training a model of N parameters on D examples and then serving it (seed 001 eq. 11):

    Z(N, D) = Z_data D + Z_train C_train(N, D) + Z_infer C_infer(N)

with C_train = D f_train(N) training FLOPs, C_infer = Q K f_infer(N) inference FLOPs (Q queries
served, K candidates reranked per query), Z_data the price of one training example, and
Z_train = p / (3600 R_train(N)), Z_infer = p / (3600 R_infer(N)) the prices of a FLOP at a
device-hour price p and the achieved FLOP/s R of the device (measured profiles,
:mod:`rerank_scaling.planning.costs`). f and R are power laws in N through the profiled configurations.

Budget allocation: under a budget B, size N affords D(N) = (B - Z_infer C_infer(N)) / (Z_data +
Z_train f_train(N)) examples; the fitted joint law's prediction M(N, D(N)) is maximised over N
(grid, then bounded refinement in log N), with and without the inference term.

ROI-constrained choice (seed 003 eqs. 5-6): with the training set D fixed, the value is a linear
map of the metric, V(N) = v sign (M(N, D) - M_ref) (M_ref e.g. BM25's value: what the reranker
adds over the first stage), and

    N_roi = argmax_N M(N, D)   subject to   V(N) / Z(N, D) >= lambda          (eqs. 5-6)

by grid search over candidate sizes (maximising V is the same as maximising M: v > 0). Without a
configured v no choice is made: any default v would decide the answer (a v scaled so that the best
candidate meets lambda is circular), so the plan reports the frontier (metric and cost per size)
and, per size, the break-even v* = lambda Z(N, D) / (sign (M(N, D) - M_ref)) at which it becomes
feasible; the user reads the choice off for their own v. The metric
may come from any fitted law over N and S, or over training FLOPs C (the broken neural scaling law,
seed 003 eq. 4), with C = 6 N tokens_per_example D as in the training sidecars.

:func:`make_plan` assembles the planning table from the fit stage's joint-protocol fits, the runs'
token and step counts and the cost profiles: one row per profile, per (group, budget, cost scope)
and per (group, law) of the ROI choice (plus, without a value per metric point, ``frontier`` rows
at the configured sizes). Only a joint fit with status ``ok`` is planned with: a missing fit, or
one whose status is ``degenerate`` or ``failed``, becomes a row with that status and the reason
"not identifiable: <the fit's reason>" instead of an optimum.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.forms import SCALES, Law
from rerank_scaling.laws.protocols import GROUP_KEYS, FitSettings
from rerank_scaling.planning.costs import (
    CostProfile,
    EncoderShape,
    cached_profile,
    flop_check,
    keys_per_token,
    window_of,
)
from rerank_scaling.records import metric_direction

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlanSettings:
    """Config ``planning``; every key optional (``null``: derived from the run, see the docs)."""

    metric: str | None = None  # figures: metric (default: the first fitted metric)
    split: str | None = None  # figures: split (default: the first fitted split)
    currency: str = "USD"
    gpu_hour_price: float = 2.5  # per device-hour when the profiled device is a GPU
    cpu_hour_price: float = 0.1  # per device-hour on CPU
    budgets: tuple[float, ...] | None = None  # null: reference cost x (1/4, 1, 4, 16)
    z_data: float = 1e-5  # price of one training example (query-document pair)
    inference_queries: float = 10_000.0  # queries served over the model's life
    candidates_per_query: int | None = None  # null: evaluation.rerank_depth
    query_tokens: int = 16  # query segment length G of windowed attention
    training_examples: float | None = None  # ROI's D; null: the most examples any run saw
    roi_lambda: float = 1.0
    value_per_metric_point: float | None = None  # null: no ROI choice; the frontier and break-even v
    value_reference: str | float = "bm25"  # M_ref: "bm25" (its value on the split) or a number
    size_range: tuple[float, float] | None = None  # null: [smallest / 4, largest x 32] configured
    size_count: int = 200
    profile: bool = True
    profile_steps: int = 2
    profile_batch: int = 16
    nominal_flops_per_second: float = 1e10  # when profile is false
    gpu_name: str | None = None  # the GPU of the paper-grid estimate (scripts/paper_grid_cost.py)
    peak_flops: float | None = None  # its peak dense BF16 FLOP/s
    mfu: float = 0.4  # achieved / peak FLOP/s assumed for that estimate


# --- cost model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerLaw:
    """y = coef (N / 1e6)^exponent (N in parameters; millions inside for conditioning).

    With ``clip`` = (lo, hi), N is clipped to [lo, hi] first: constant beyond the measured sizes
    (used for achieved FLOP/s, which should not be extrapolated from a few noisy timings).
    """

    coef: float
    exponent: float
    clip: tuple[float, float] | None = None

    def __call__(self, n: np.ndarray | float) -> np.ndarray:
        n = np.asarray(n, float)
        if self.clip is not None:
            n = np.clip(n, *self.clip)
        return self.coef * (n / SCALES["N"]) ** self.exponent

    @classmethod
    def through(
        cls, n: np.ndarray, y: np.ndarray, default_exponent: float = 1.0, clip: bool = False
    ) -> PowerLaw:
        """Least squares in log-log through the points; one distinct size: ``default_exponent``."""
        n, y = np.asarray(n, float), np.asarray(y, float)
        keep = np.isfinite(n) & np.isfinite(y) & (n > 0) & (y > 0)
        n, y = n[keep], y[keep]
        if not len(n):
            raise ValueError("a power law needs at least one positive point")
        log_n, log_y = np.log(n / SCALES["N"]), np.log(y)
        bounds = (float(n.min()), float(n.max())) if clip else None
        if np.ptp(log_n) < 1e-9:
            coef = float(np.exp(log_y.mean() - default_exponent * log_n.mean()))
            return cls(coef, default_exponent, bounds)
        slope, intercept = np.polyfit(log_n, log_y, 1)
        return cls(float(np.exp(intercept)), float(slope), bounds)

    @classmethod
    def constant(cls, value: float) -> PowerLaw:
        return cls(float(value), 0.0)


@dataclass(frozen=True)
class CostModel:
    """Seed 001 eq. 11: Z(N, D) = Z_data D + Z_train C_train(N, D) + Z_infer C_infer(N)."""

    train_flops: PowerLaw  # f_train: training FLOPs per example
    infer_flops: PowerLaw  # f_infer: inference FLOPs per (query, candidate) pair
    train_rate: PowerLaw  # R_train: achieved training FLOP/s
    infer_rate: PowerLaw  # R_infer
    price_per_hour: float  # p, per device-hour
    z_data: float  # Z_data, per training example
    pairs_served: float  # Q K

    def z_train(self, n: np.ndarray | float) -> np.ndarray:
        """Price of one training FLOP, p / (3600 R_train(N))."""
        return self.price_per_hour / 3600.0 / self.train_rate(n)

    def z_infer(self, n: np.ndarray | float) -> np.ndarray:
        return self.price_per_hour / 3600.0 / self.infer_rate(n)

    def train_cost_per_example(self, n: np.ndarray | float) -> np.ndarray:
        return self.z_train(n) * self.train_flops(n)

    def inference_cost(self, n: np.ndarray | float) -> np.ndarray:
        """Z_infer C_infer(N): serving Q queries x K candidates."""
        return self.pairs_served * self.z_infer(n) * self.infer_flops(n)

    def total(self, n: np.ndarray | float, d: np.ndarray | float, inference: bool = True) -> np.ndarray:
        """Z(N, D) (eq. 11); ``inference=False`` drops the serving term."""
        d = np.asarray(d, float)
        cost = self.z_data * d + d * self.train_cost_per_example(n)
        return cost + self.inference_cost(n) if inference else cost

    def affordable_examples(self, n: np.ndarray | float, budget: float, inference: bool = True) -> np.ndarray:
        """D(N) with Z(N, D) = B; NaN where the budget does not cover serving plus one example."""
        fixed = self.inference_cost(n) if inference else 0.0 * np.asarray(n, float)
        d = (budget - fixed) / (self.z_data + self.train_cost_per_example(n))
        return np.where(d > 0, d, np.nan)

    def breakdown(self, n: np.ndarray | float, d: np.ndarray | float, inference: bool = True) -> pd.DataFrame:
        """Cost terms, FLOPs and device-hours of training N on D examples (and serving it)."""
        n, d = np.broadcast_arrays(np.atleast_1d(np.asarray(n, float)), np.atleast_1d(np.asarray(d, float)))
        serve = float(inference)
        train_flops = d * self.train_flops(n)
        infer_flops = serve * self.pairs_served * self.infer_flops(n)
        hours = train_flops / self.train_rate(n) / 3600 + infer_flops / self.infer_rate(n) / 3600
        return pd.DataFrame(
            {
                "cost_data": self.z_data * d,
                "cost_train": d * self.train_cost_per_example(n),
                "cost_infer": serve * self.inference_cost(n),
                "cost_total": self.total(n, d, inference),
                "train_flops": train_flops,
                "infer_flops": infer_flops,
                "device_hours": hours,
            }
        )


# --- forecasts -----------------------------------------------------------------------------------


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


# --- budget allocation (seed 001 eq. 11) -----------------------------------------------------------


@dataclass(frozen=True)
class Allocation:
    """The best size under one budget, and what it buys."""

    budget: float
    inference: bool
    status: str  # "ok" | "infeasible"
    reason: str = ""
    size: float = float("nan")
    examples: float = float("nan")
    predicted: float = float("nan")
    at_boundary: bool = False  # the optimum is at an end of the size range (may lie outside it)


def budget_curve(
    forecast: MetricForecast, cost: CostModel, budget: float, sizes: np.ndarray, inference: bool = True
) -> pd.DataFrame:
    """M(N, D(N)) over ``sizes`` when each size spends the whole ``budget`` (NaN: unaffordable)."""
    sizes = np.asarray(sizes, float)
    d = cost.affordable_examples(sizes, budget, inference)
    predicted = np.where(np.isfinite(d), forecast(sizes, np.nan_to_num(d, nan=1.0)), np.nan)
    return pd.DataFrame({"size": sizes, "examples": d, "predicted": predicted})


def optimal_allocation(
    forecast: MetricForecast,
    cost: CostModel,
    budget: float,
    bounds: tuple[float, float],
    inference: bool = True,
    grid: int = 256,
) -> Allocation:
    """argmax_N M(N, D(N)) on [lo, hi]: a log-spaced grid, then bounded refinement around its best."""
    sizes = np.geomspace(*bounds, grid)

    def utility(n: np.ndarray) -> np.ndarray:
        d = cost.affordable_examples(n, budget, inference)
        return np.where(np.isfinite(d), forecast.utility(n, np.nan_to_num(d, nan=1.0)), -np.inf)

    values = utility(sizes)
    if not np.isfinite(values).any():
        return Allocation(
            budget, inference, "infeasible", f"budget {budget:.4g} buys no training at any size in range"
        )
    best = int(np.argmax(values))
    lo, hi = np.log(sizes[max(best - 1, 0)]), np.log(sizes[min(best + 1, grid - 1)])
    refined = minimize_scalar(
        lambda log_n: -float(utility(np.array([np.exp(log_n)]))[0]),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-7},
    )
    size = float(np.exp(refined.x)) if -refined.fun >= values[best] else float(sizes[best])
    d = float(cost.affordable_examples(np.array([size]), budget, inference)[0])
    return Allocation(
        budget,
        inference,
        "ok",
        size=size,
        examples=d,
        predicted=float(forecast(np.array([size]), np.array([d]))[0]),
        at_boundary=best in (0, grid - 1),
    )


# --- ROI-constrained choice (seed 003 eqs. 5-6) -----------------------------------------------------


def value_of(predicted: np.ndarray, sign: int, value_per_point: float, reference: float) -> np.ndarray:
    """V = v sign (M - M_ref): revenue as a linear map of the metric's gain over the reference."""
    return value_per_point * sign * (np.asarray(predicted, float) - reference)


def roi_frontier(
    forecast: MetricForecast,
    cost: CostModel,
    sizes: np.ndarray,
    examples: float,
    value_per_point: float,
    reference: float,
    lam: float,
    inference: bool = True,
) -> pd.DataFrame:
    """Per candidate size (training set ``examples`` fixed): metric, value, cost, ROI = V / Z, feasible,
    and the break-even value per metric point v* = lambda Z / (sign (M - M_ref)) (NaN where the size
    does not beat the reference). ``value_per_point`` NaN: no value map; value, ROI NaN, none feasible."""
    sizes = np.asarray(sizes, float)
    d = np.full(len(sizes), float(examples))
    predicted = forecast(sizes, d)
    value = value_of(predicted, forecast.sign, value_per_point, reference)
    total = cost.total(sizes, d, inference)
    roi = value / total
    gain = value_of(predicted, forecast.sign, 1.0, reference)
    with np.errstate(all="ignore"):
        break_even = np.where(gain > 0, lam * total / gain, np.nan)
    frame = pd.DataFrame(
        {
            "size": sizes,
            "examples": d,
            "predicted": predicted,
            "value": value,
            "roi": roi,
            "break_even_value_per_point": break_even,
        }
    )
    frame = pd.concat([frame, cost.breakdown(sizes, d, inference)], axis=1)
    frame["feasible"] = np.isfinite(roi) & (roi >= lam)
    return frame


def roi_choice(frontier: pd.DataFrame, sign: int) -> pd.Series | None:
    """Eqs. 5-6 by grid search: the feasible candidate with the best metric; None if none is feasible."""
    feasible = frontier[frontier["feasible"] & np.isfinite(frontier["predicted"])]
    if feasible.empty:
        return None
    return feasible.loc[(sign * feasible["predicted"]).idxmax()]


# --- the plan: fits, runs and profiles -> rows of plan.parquet ------------------------------------

BUDGET_MULTIPLES = (0.25, 1.0, 4.0, 16.0)
NO_VALUE = (
    "no value per metric point configured (planning.value_per_metric_point): no choice is made; "
    "the frontier and each size's break-even value per point are reported"
)
#: What :meth:`CostModel.breakdown` returns per candidate, carried into the plan rows.
COST_FIELDS = (
    "cost_total",
    "cost_data",
    "cost_train",
    "cost_infer",
    "train_flops",
    "infer_flops",
    "device_hours",
)
SCOPES = {True: "data+train+inference", False: "data+train"}
PLAN_COLUMNS = [
    "kind",
    *GROUP_KEYS,
    "law",
    "model",
    "status",
    "reason",
    "budget",
    "cost_scope",
    "roi_lambda",
    "value_per_point",
    "value_reference",
    "size",
    "examples",
    "steps",
    "predicted",
    "value",
    "roi",
    "break_even_value_per_point",
    *COST_FIELDS,
    "at_boundary",
    "currency",
    "device",
    "train_seconds_per_example",
    "infer_seconds_per_pair",
    "train_flops_per_second",
    "infer_flops_per_second",
    "flops_analytic_over_counted",
    "peak_memory_mb",
    "cost_per_1k_examples",
    "cost_per_1k_pairs",
    "cached",
]


@dataclass(frozen=True)
class SizePoint:
    """A configured model size: its shape (analytic FLOPs) and achieved FLOP/s (profile or nominal)."""

    name: str
    size: float  # on the fit's size axis
    shape: EncoderShape
    train_rate: float
    infer_rate: float


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


def collect_profiles(
    models: list[dict[str, Any]],
    settings: PlanSettings,
    training: dict[str, Any],
    device: str,
    cache: str | Path,
) -> list[CostProfile]:
    """A measured profile of every configured model (cached per device); none when profile is off."""
    if not settings.profile:
        return []
    profiles = []
    for spec in models:
        try:
            profiles.append(
                cached_profile(
                    spec,
                    int(training.get("max_length", 256)),
                    settings.profile_batch,
                    settings.profile_steps,
                    device,
                    cache,
                    bool(training.get("freeze_embeddings", False)),
                )
            )
        except (OSError, RuntimeError, ValueError) as err:  # a model that cannot be built or run
            log.warning("could not profile %s: %s", spec.get("name"), err)
    return profiles


def size_points(
    models: list[dict[str, Any]],
    profiles: list[CostProfile],
    metrics: pd.DataFrame,
    size_column: str,
    nominal_rate: float,
) -> list[SizePoint]:
    """Configured sizes for the cost curves: from their profiles, else from the metrics table."""
    points = []
    profiled = {p.model: p for p in profiles}
    runs = metrics[metrics["family"] != "bm25"].drop_duplicates("model")
    heads = {m["name"]: m.get("head", "cls") for m in models}
    for spec in models:
        profile = profiled.get(spec["name"])
        if profile is not None:
            size = profile.non_embedding_params if size_column == "non_embedding_params" else profile.params
            points.append(
                SizePoint(
                    spec["name"],
                    float(size),
                    EncoderShape(**profile.shape),
                    profile.train_flops_per_second,
                    profile.infer_flops_per_second,
                )
            )
    if points:
        return points
    # No profiles: configured models as the metrics table describes them (any model if none match).
    chosen = runs[runs["model"].isin(heads)] if runs["model"].isin(heads).any() else runs
    for _, row in chosen.iterrows():
        hidden = int(row["hidden"])
        shape = EncoderShape(int(row["layers"]), hidden, 4 * hidden, head=heads.get(row["model"], "cls"))
        points.append(SizePoint(row["model"], float(row[size_column]), shape, nominal_rate, nominal_rate))
    return points


def cost_model(
    points: list[SizePoint],
    attention: str,
    tokens_per_example: float,
    settings: PlanSettings,
    price_per_hour: float,
    pairs_served: float,
) -> CostModel:
    """Eq. 11's cost model for one attention variant: FLOPs and FLOP/s as power laws in N."""
    keys = keys_per_token(tokens_per_example, window_of(attention), settings.query_tokens)
    sizes = np.array([p.size for p in points])
    return CostModel(
        train_flops=PowerLaw.through(sizes, [p.shape.train_flops(tokens_per_example, keys) for p in points]),
        infer_flops=PowerLaw.through(
            sizes, [p.shape.forward_flops(tokens_per_example, keys) for p in points]
        ),
        train_rate=PowerLaw.through(sizes, [p.train_rate for p in points], 0.0, clip=True),
        infer_rate=PowerLaw.through(sizes, [p.infer_rate for p in points], 0.0, clip=True),
        price_per_hour=price_per_hour,
        z_data=settings.z_data,
        pairs_served=pairs_served,
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
    sign = metric_direction(metric)
    if name.startswith("bnsl"):
        return laws.bnsl_law(int(name.removeprefix("bnsl") or 1), sign)
    return {"additive": laws.additive_law(sign), "multiplicative": laws.multiplicative_law()}[name]


def reference_metric(metrics: pd.DataFrame, metric: str, split: str, setting: str | float) -> float:
    """M_ref of the value map: BM25's value on the split ("bm25"), or the configured number."""
    if not isinstance(setting, str):
        return float(setting)
    rows = metrics[
        (metrics["family"] == "bm25") & (metrics["metric"] == metric) & (metrics["split"] == split)
    ]
    return float(rows["value"].iloc[0]) if len(rows) else 0.0


@dataclass
class Plan:
    """What :func:`make_plan` found: the table's rows, and the curves the figures draw."""

    rows: list[dict[str, Any]]
    curves: pd.DataFrame  # budget curves of every group
    frontiers: pd.DataFrame  # ROI frontiers of every group and law
    settings: PlanSettings  # resolved (budgets filled in)
    sizes: np.ndarray  # candidate sizes
    configured: dict[str, float]  # configured model -> size
    size_label: str


def metric_range(metric: str) -> tuple[float, float]:
    """Values a metric can take: [0, 1] for the effectiveness measures, [0, inf) for losses (CE)."""
    return (0.0, 1.0) if metric_direction(metric) > 0 else (0.0, np.inf)


def _forecast(fit: pd.Series, stats: RunStats, step_axis: str) -> MetricForecast:
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


def _missing(kind: str, keys: dict[str, Any], law: str, status: str, reason: str) -> dict[str, Any]:
    return {"kind": kind, **keys, "law": law, "status": status, "reason": reason}


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


def make_plan(
    metrics: pd.DataFrame,
    fits: pd.DataFrame,
    models: list[dict[str, Any]],
    profiles: list[CostProfile],
    settings: PlanSettings,
    fitting: FitSettings,
    device_kind: str,
    rerank_depth: int,
    stats: RunStats,
) -> Plan:
    """Profile rows, then per fitted group: optimal size per budget (eq. 11) and ROI choice (eqs. 5-6)."""
    size_column = "non_embedding_params" if fitting.size_axis == "non_embedding" else "params"
    price = settings.gpu_hour_price if device_kind == "cuda" else settings.cpu_hour_price
    pairs = settings.inference_queries * (settings.candidates_per_query or rerank_depth)
    points = size_points(models, profiles, metrics, size_column, settings.nominal_flops_per_second)
    rows: list[dict[str, Any]] = []
    for profile in profiles:
        rows.append(
            {
                "kind": "profile",
                "model": profile.model,
                "status": "cached" if profile.cached else "measured",
                "size": float(
                    profile.non_embedding_params if size_column == "non_embedding_params" else profile.params
                ),
                "device": profile.device,
                "currency": settings.currency,
                "train_seconds_per_example": profile.train_seconds_per_example,
                "infer_seconds_per_pair": profile.infer_seconds_per_pair,
                "train_flops": profile.train_flops_analytic / profile.batch,
                "infer_flops": profile.infer_flops_analytic / profile.batch,
                "train_flops_per_second": profile.train_flops_per_second,
                "infer_flops_per_second": profile.infer_flops_per_second,
                "flops_analytic_over_counted": profile.train_flops_analytic
                / max(profile.train_flops_measured, 1),
                "peak_memory_mb": profile.peak_memory_mb,
                "cost_per_1k_examples": 1000 * profile.train_seconds_per_example / 3600 * price,
                "cost_per_1k_pairs": 1000 * profile.infer_seconds_per_pair / 3600 * price,
                "cached": profile.cached,
            }
        )
    empty = Plan(rows, pd.DataFrame(), pd.DataFrame(), settings, np.array([]), {}, size_column)
    if not points:
        rows.append(_missing("budget", {}, "additive", "failed", "no model size could be profiled or found"))
        return empty
    configured = {p.name: p.size for p in points}
    lo, hi = settings.size_range or (min(configured.values()) / 4, max(configured.values()) * 32)
    sizes = np.geomspace(lo, hi, settings.size_count)
    d_roi = settings.training_examples or stats.max_examples
    # Reference run of the default budgets: the largest configured size (kept inside the candidate
    # range) trained on D and served, with full attention.
    reference_cost = cost_model(points, "full", stats.default_tokens, settings, price, pairs)
    n_ref = float(np.clip(max(configured.values()), lo, hi))
    z_ref = float(reference_cost.total(n_ref, d_roi, inference=True))
    budgets = settings.budgets or tuple(round(float(z_ref * m), 6) for m in BUDGET_MULTIPLES)
    settings = replace(settings, budgets=tuple(budgets), training_examples=d_roi)

    joint = joint_fits(fits)
    groups = joint[GROUP_KEYS].drop_duplicates().to_dict("records")
    if not groups:
        rows.append(_missing("budget", {}, "additive", "missing", "no joint-protocol fit in fits.parquet"))
    curves, frontiers = [], []
    for keys in groups:
        mask = np.ones(len(joint), dtype=bool)
        for key, value in keys.items():
            mask &= (joint[key] == value).to_numpy()
        group = joint[mask]
        cost = cost_model(
            points,
            keys["attention"],
            stats.tokens(keys["objective"], keys["attention"]),
            settings,
            price,
            pairs,
        )
        additive = group[group["law"] == "additive"]
        unusable = unusable_fit(additive, "additive")
        if unusable is not None:
            rows.append(_missing("budget", keys, "additive", *unusable))
        else:
            forecast = _forecast(additive.iloc[0], stats, fitting.step_axis)
            for inference in (True, False):
                for budget in settings.budgets:
                    allocation = optimal_allocation(forecast, cost, budget, (lo, hi), inference)
                    row = {
                        "kind": "budget",
                        **keys,
                        "law": "additive",
                        "status": allocation.status,
                        "reason": allocation.reason,
                        "budget": budget,
                        "cost_scope": SCOPES[inference],
                        "size": allocation.size,
                        "examples": allocation.examples,
                        "steps": allocation.examples / forecast.examples_per_step,
                        "predicted": allocation.predicted,
                        "at_boundary": allocation.at_boundary,
                        "currency": settings.currency,
                    }
                    if allocation.status == "ok":
                        row.update(
                            cost.breakdown(allocation.size, allocation.examples, inference).iloc[0].to_dict()
                        )
                    rows.append(row)
                    curve = budget_curve(forecast, cost, budget, sizes, inference)
                    curves.append(curve.assign(**keys, budget=budget, inference=inference))
        rows += _roi_rows(keys, group, metrics, settings, stats, fitting, cost, sizes, configured, frontiers)
    return Plan(
        rows,
        pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(),
        pd.concat(frontiers, ignore_index=True) if frontiers else pd.DataFrame(),
        settings,
        sizes,
        configured,
        size_column,
    )


def _roi_rows(
    keys: dict[str, Any],
    group: pd.DataFrame,
    metrics: pd.DataFrame,
    settings: PlanSettings,
    stats: RunStats,
    fitting: FitSettings,
    cost: CostModel,
    sizes: np.ndarray,
    configured: dict[str, float],
    frontiers: list[pd.DataFrame],
) -> list[dict[str, Any]]:
    """ROI-constrained choice (seed 003 eqs. 5-6) with the additive law and the BNSL over FLOPs (eq. 4)."""
    rows = []
    d = float(settings.training_examples)
    reference = reference_metric(metrics, keys["metric"], keys["split"], settings.value_reference)
    names = ["additive"] + sorted(n for n in group["law"].unique() if str(n).startswith("bnsl"))
    if len(names) == 1:
        names.append(f"bnsl{fitting.bnsl_breaks}")
    value_per_point = settings.value_per_metric_point
    for name in names:
        fit = group[group["law"] == name]
        base = {"kind": "roi", **keys, "law": name, "roi_lambda": settings.roi_lambda, "examples": d}
        unusable = unusable_fit(fit, name)
        if unusable is not None:
            rows.append({**base, "status": unusable[0], "reason": unusable[1]})
            continue
        forecast = _forecast(fit.iloc[0], stats, fitting.step_axis)
        if value_per_point is None:
            frontier = roi_frontier(forecast, cost, sizes, d, np.nan, reference, settings.roi_lambda)
            frontiers.append(frontier.assign(**keys, law=name, reference=reference))
            rows.append({**base, "status": "no_choice", "reason": NO_VALUE, "currency": settings.currency})
            at_sizes = roi_frontier(
                forecast, cost, np.array(list(configured.values())), d, np.nan, reference, settings.roi_lambda
            )
            for model, (_, point) in zip(configured, at_sizes.iterrows(), strict=True):
                fields = ("size", "predicted", "break_even_value_per_point", *COST_FIELDS)
                rows.append(
                    {
                        **base,
                        "kind": "frontier",
                        "model": model,
                        "status": "ok",
                        "currency": settings.currency,
                        "value_reference": reference,
                    }
                    | {k: point[k] for k in fields}
                )
            continue
        frontier = roi_frontier(forecast, cost, sizes, d, value_per_point, reference, settings.roi_lambda)
        frontiers.append(frontier.assign(**keys, law=name, reference=reference))
        choice = roi_choice(frontier, forecast.sign)
        base.update(value_per_point=value_per_point, currency=settings.currency, cost_scope=SCOPES[True])
        if choice is None:
            best = frontier["roi"].max()
            rows.append({**base, "status": "infeasible", "reason": f"best ROI {best:.3g} < lambda"})
            continue
        chosen = {k: choice[k] for k in ("size", "predicted", "value", "roi", *COST_FIELDS)}
        rows.append(
            {
                **base,
                **chosen,
                "status": "ok",
                "steps": d / forecast.examples_per_step,
                "at_boundary": bool(choice["size"] in (sizes[0], sizes[-1])),
            }
        )
    return rows


def plan_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows).reindex(columns=PLAN_COLUMNS)
    for column in ("at_boundary", "cached"):
        table[column] = table[column].astype("boolean")
    for column in (
        "kind",
        *GROUP_KEYS,
        "law",
        "model",
        "status",
        "reason",
        "cost_scope",
        "currency",
        "device",
    ):
        table[column] = table[column].astype("string")
    return table


def plan_markdown(table: pd.DataFrame, settings: PlanSettings, profiles: list[CostProfile]) -> str:
    """Three sections: cost profiles, budget allocation, ROI-constrained choice."""
    parts = ["# Planning: costs, budget allocation, ROI-constrained model choice", ""]
    sections = (
        (
            "profile",
            "Measured cost profiles",
            [
                "model",
                "status",
                "size",
                "device",
                "train_seconds_per_example",
                "infer_seconds_per_pair",
                "train_flops_per_second",
                "flops_analytic_over_counted",
                "peak_memory_mb",
                "cost_per_1k_examples",
                "cost_per_1k_pairs",
            ],
        ),
        (
            "budget",
            "Budget allocation (seed 001 eq. 11)",
            [
                *GROUP_KEYS[1:],
                "status",
                "budget",
                "cost_scope",
                "size",
                "examples",
                "predicted",
                "cost_data",
                "cost_train",
                "cost_infer",
                "at_boundary",
                "reason",
            ],
        ),
        (
            "roi",
            f"ROI-constrained choice (seed 003 eqs. 5-6), lambda = {settings.roi_lambda}",
            [
                *GROUP_KEYS[1:],
                "law",
                "status",
                "size",
                "predicted",
                "value",
                "cost_total",
                "roi",
                "value_per_point",
                "reason",
            ],
        ),
        (
            "frontier",
            "ROI frontier at the configured sizes: no value per metric point configured, so no choice "
            "is made; a size is ROI-feasible for a value per point >= its break-even value",
            [
                *GROUP_KEYS[1:],
                "law",
                "model",
                "size",
                "predicted",
                "cost_total",
                "break_even_value_per_point",
            ],
        ),
    )
    for kind, title, columns in sections:
        if kind == "frontier" and not (table["kind"] == kind).any():
            continue
        rows = table[table["kind"] == kind][columns].dropna(axis=1, how="all")
        text = rows.select_dtypes(include=["string", "boolean"]).columns
        rows[text] = rows[text].astype(object).fillna("")
        parts += [
            f"## {title}",
            "",
            rows.to_markdown(index=False, floatfmt=".4g") if len(rows) else "(none)",
            "",
        ]
    parts += [
        "## FLOPs check (analytic vs torch.utils.flop_counter)",
        "",
        *[f"- {flop_check(p)}" for p in profiles],
        "",
    ]
    parts += [
        "## Settings",
        "",
        f"Currency {settings.currency}; budgets {list(settings.budgets or [])}; training examples (ROI) "
        f"{settings.training_examples:.4g}; queries served {settings.inference_queries:.4g}; "
        f"profiles: {len(profiles)} ({sum(p.cached for p in profiles)} from the cache).",
        "",
    ]
    return "\n".join(parts)
