"""Held-out protocols (seed paper 000 §5-5.1), applied per (family, objective, attention, metric, split).

* model scaling: fit on the last ``last_k`` checkpoints of sizes with role ``fit``; forecast the
  sizes with role ``held_out`` at their last ``last_k`` checkpoints (law in N);
* data scaling, per size: fit all but the last ``holdout_last`` checkpoints, forecast those (law in S);
* joint scaling: hold out the last ``holdout_last`` checkpoints of every fit size and every
  checkpoint of held-out sizes; fit the additive joint law (and, on the same split, the
  multiplicative ablation, Fang et al.'s joint law for losses, and the BNSL over FLOPs).

Seeds are averaged per (model, step) before fitting.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling import laws
from rerank_scaling.fit_statistics import bootstrap, forecast_errors, goodness_of_fit
from rerank_scaling.fitting import fit_law
from rerank_scaling.records import metric_direction

log = logging.getLogger(__name__)
GROUP_KEYS = ["family", "objective", "attention", "metric", "split"]


@dataclass(frozen=True)
class FitSettings:
    """Config ``fitting``."""

    metrics: tuple[str, ...] = ("nDCG@10",)
    splits: tuple[str, ...] | None = None
    size_axis: str = "non_embedding"  # or "total"
    step_axis: str = "step"  # or "examples"
    last_k: int = 10
    holdout_last: int = 5
    bootstrap: int = 500
    seed: int = 0
    loss: str = "least_squares"  # or "huber_log"
    huber_delta: float = 1e-3
    bnsl_breaks: int = 1
    equal_compute: tuple[str, ...] | None = None


@dataclass
class ProtocolOutput:
    fits: list[dict[str, Any]] = field(default_factory=list)
    forecasts: list[pd.DataFrame] = field(default_factory=list)


def prepare(table: pd.DataFrame, settings: FitSettings) -> pd.DataFrame:
    """Checkpoint rows of the chosen metrics/splits, seeds averaged, with scaled N, S and C."""
    rows = table[(table["family"] != "bm25") & table["metric"].isin(settings.metrics)]
    if settings.splits:
        rows = rows[rows["split"].isin(settings.splits)]
    size_column = "non_embedding_params" if settings.size_axis == "non_embedding" else "params"
    keys = [*GROUP_KEYS, "model", "role", "checkpoint"]
    averaged = rows.groupby(keys, as_index=False).agg(
        value=("value", "mean"),
        size=(size_column, "first"),
        step=("step", "mean"),
        examples=("examples", "mean"),
        flops=("flops", "mean"),
        seeds=("seed", "nunique"),
    )
    averaged["N"] = averaged["size"] / laws.SCALES["N"]
    averaged["S"] = averaged[settings.step_axis] / laws.SCALES["S"]
    averaged["C"] = averaged["flops"] / laws.SCALES["C"]
    return averaged


def _last(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    return frame.sort_values("step").groupby("model", group_keys=False).tail(k)


def _but_last(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    ordered = frame.sort_values("step")
    return ordered.groupby("model", group_keys=False).apply(
        lambda f: f.iloc[:-k] if len(f) > k else f.iloc[:0]
    )


def splits_for(
    protocol: str, group: pd.DataFrame, settings: FitSettings
) -> Iterator[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(label, fit rows, held-out rows) of a protocol on one group."""
    fit_sizes, held_sizes = group[group["role"] == "fit"], group[group["role"] == "held_out"]
    if protocol == "model":
        yield "model", _last(fit_sizes, settings.last_k), _last(held_sizes, settings.last_k)
    elif protocol == "data":
        for model, rows in group.groupby("model"):
            tail = rows.sort_values("step").tail(settings.holdout_last)
            yield f"data:{model}", _but_last(rows, settings.holdout_last), tail
    elif protocol == "joint":
        held = pd.concat(
            [fit_sizes.sort_values("step").groupby("model").tail(settings.holdout_last), held_sizes]
        )
        yield "joint", _but_last(fit_sizes, settings.holdout_last), held


def laws_for(protocol: str, metric: str, settings: FitSettings) -> list[laws.Law]:
    """Which laws each protocol fits for a metric (loss-only and RBP-only forms where they apply)."""
    sign = metric_direction(metric)
    if protocol == "model":
        chosen = [laws.power_law("N", sign)]
        if sign < 0:
            chosen.append(laws.fang_law("N"))
        if metric.startswith("RBP@"):
            chosen.append(laws.relative_law())
        return chosen
    if protocol == "data":
        return [laws.power_law("S", sign)] + ([laws.fang_law("S")] if sign < 0 else [])
    chosen = [laws.additive_law(sign), laws.multiplicative_law(), laws.bnsl_law(settings.bnsl_breaks, sign)]
    return chosen + ([laws.fang_joint_law()] if sign < 0 else [])


def _variables(rows: pd.DataFrame, law: laws.Law) -> dict[str, np.ndarray]:
    return {v: rows[v].to_numpy(float) for v in law.variables}


def fit_one(
    law: laws.Law,
    label: str,
    keys: dict[str, Any],
    fit_rows: pd.DataFrame,
    held_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Fit, diagnose, forecast and bootstrap one law on one protocol split."""
    result = fit_law(
        law, _variables(fit_rows, law), fit_rows["value"].to_numpy(float), settings.loss, settings.huber_delta
    )
    record = {
        **keys,
        "protocol": label.split(":")[0],
        "split_label": label,
        "law": law.name,
        "formula": law.formula,
        "status": result.status,
        "reason": result.reason,
        "n_fit": len(fit_rows),
        "n_held_out": len(held_rows),
    }
    if not result.ok:
        return record, pd.DataFrame()
    observed = fit_rows["value"].to_numpy(float)
    quality = goodness_of_fit(
        observed, law.predict(result.params, _variables(fit_rows, law)), len(law.params)
    )
    both = pd.concat([fit_rows.assign(held_out=False), held_rows.assign(held_out=True)], ignore_index=True)
    x_all = _variables(both, law)
    boot = bootstrap(
        law, result, _variables(fit_rows, law), observed, x_all, settings.bootstrap, seed, settings.loss
    )
    forecast = both[
        [*GROUP_KEYS, "model", "role", "checkpoint", "step", "examples", "size", "flops", "value", "held_out"]
    ].rename(columns={"value": "observed"})
    forecast = forecast.assign(
        protocol=record["protocol"],
        split_label=label,
        law=law.name,
        forecast=law.predict(result.params, x_all),
        low=boot.forecast_low,
        high=boot.forecast_high,
    )
    forecast["covered"] = (forecast["observed"] >= forecast["low"]) & (
        forecast["observed"] <= forecast["high"]
    )
    held = forecast[forecast["held_out"]]
    record.update(
        {
            "params": json.dumps(dict(zip(law.params, map(float, result.params), strict=True))),
            "params_low": json.dumps(dict(zip(law.params, map(float, boot.params_low), strict=True))),
            "params_high": json.dumps(dict(zip(law.params, map(float, boot.params_high), strict=True))),
            "r2": quality.r2,
            "adj_r2": quality.adj_r2,
            "f_stat": quality.f_stat,
            "p_value": quality.p_value,
            "significance": quality.stars,
            "bootstrap_ok": boot.successes,
            "coverage": float(held["covered"].mean()) if len(held) else float("nan"),
            **forecast_errors(held["observed"], held["forecast"]),
        }
    )
    return record, forecast


def fit_group(keys: dict[str, Any], group: pd.DataFrame, settings: FitSettings, seed: int) -> ProtocolOutput:
    """Every protocol and law on one (family, objective, attention, metric, split) group."""
    output = ProtocolOutput()
    for protocol in ("model", "data", "joint"):
        for label, fit_rows, held_rows in splits_for(protocol, group, settings):
            for law in laws_for(protocol, keys["metric"], settings):
                record, forecast = fit_one(law, label, keys, fit_rows, held_rows, settings, seed)
                output.fits.append(record)
                if not forecast.empty:
                    output.forecasts.append(forecast)
    return output


def run_protocols(
    table: pd.DataFrame, settings: FitSettings, workers: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All protocols on every group, ``workers`` groups at a time: (fits, forecasts) long tables."""
    from concurrent.futures import ProcessPoolExecutor

    data = prepare(table, settings)
    jobs = [
        (dict(zip(GROUP_KEYS, values, strict=True)), group, settings, settings.seed + index)
        for index, (values, group) in enumerate(data.groupby(GROUP_KEYS))
    ]
    outputs: list[ProtocolOutput] = []

    def collect(results: Any) -> None:
        for (keys, *_), output in zip(jobs, results, strict=True):
            outputs.append(output)
            log.info("fitted group %d/%d: %s", len(outputs), len(jobs), " ".join(map(str, keys.values())))

    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            collect(pool.map(fit_group, *zip(*jobs, strict=True)))
    else:
        collect(fit_group(*job) for job in jobs)
    fits = pd.DataFrame([record for out in outputs for record in out.fits])
    frames = [frame for out in outputs for frame in out.forecasts]
    return fits, (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())
