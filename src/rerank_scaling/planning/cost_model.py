"""The cost of a model size, Fang et al., Scaling Laws for Dense Retrieval eq. 11: training a model of N
parameters on D examples and then serving it costs

    Z(N, D) = Z_data D + Z_train C_train(N, D) + Z_infer C_infer(N)

with C_train = D f_train(N) training FLOPs, C_infer = Q K f_infer(N) inference FLOPs (Q queries
served, K candidates reranked per query), Z_data the price of one training example, and
Z_train = p / (3600 R_train(N)), Z_infer = p / (3600 R_infer(N)) the prices of a FLOP at a
device-hour price p and the achieved FLOP/s R of the device (measured profiles,
:mod:`rerank_scaling.planning.measured_profiles`). f and R are power laws in N through the profiled
configurations (:func:`cost_model`). Pure numpy once the profiles are in.

Fang et al., Scaling Laws for Dense Retrieval writes the training term as Z_train N (a price per parameter at
a fixed amount of data); Z_train D f_train(N) generalises it to any D, so that budget allocation can trade
size against data at all (:mod:`.budget` argues the choice; the paper's form is the fixed-D special case).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws.forms import SCALES
from rerank_scaling.planning.encoder_flops import EncoderShape, keys_per_token, window_of
from rerank_scaling.planning.measured_profiles import CostProfile, cached_profile
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.precision import resolve_precision

log = logging.getLogger(__name__)


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
    """Fang et al., Scaling Laws for Dense Retrieval, eq. 11: Z(N, D) = Z_data D + Z_train C_train(N, D) +
    Z_infer C_infer(N)."""

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


@dataclass(frozen=True)
class SizePoint:
    """A configured model size: its shape (analytic FLOPs) and achieved FLOP/s (profile or nominal)."""

    name: str
    size: float  # on the fit's size axis
    shape: EncoderShape
    train_rate: float
    infer_rate: float


def collect_profiles(
    models: list[dict[str, Any]],
    settings: PlanSettings,
    training: dict[str, Any],
    device: str,
    cache: str | Path,
    evaluation: dict[str, Any] | None = None,
) -> list[CostProfile]:
    """A measured profile of every configured model (cached per device), in the precisions training
    and evaluation resolve to on ``device``; none when profile is off."""
    if not settings.profile:
        return []
    precisions = (
        resolve_precision(training["precision"], device, "training.precision"),
        resolve_precision(evaluation["precision"], device, "evaluation.precision"),
    )
    profiles = []
    for spec in models:
        try:
            profiles.append(
                cached_profile(
                    spec,
                    int(training["max_length"]),
                    settings.profile_batch,
                    settings.profile_steps,
                    device,
                    cache,
                    bool(training["freeze_embeddings"]),
                    precisions=precisions,
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
    heads = {m["name"]: m["head"] for m in models}
    for spec in models:
        profile = profiled.get(spec["name"])
        if profile is not None:
            size = getattr(
                profile, size_column
            )  # the axis's column is a CostProfile field (registries.size_axes)
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
