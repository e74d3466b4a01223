"""Rolling-origin backtests over model sizes (issue 12, beyond the paper).

Sizes of a group are ordered by N; for every k from 2 to (number of sizes - 1), fit on the k smallest
and forecast the next one (Tashman 2000, rolling-origin evaluation; Hyndman & Athanasopoulos,
"time series cross-validation", here over size instead of time). Two laws are backtested, each
with its protocol's rows: the power law in N on the last ``last_k`` checkpoints (model protocol)
and the additive joint law on every checkpoint (the released code's joint protocol). Each held-out
point records its forecast and its prediction interval at every level of :data:`LEVELS`, so the
calibration (nominal vs empirical coverage over all backtests) can be read off.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.protocols import FitSettings, _last, fit_split
from rerank_scaling.records import metric_direction

#: Nominal levels of the calibration curve.
LEVELS = (0.5, 0.68, 0.8, 0.9, 0.95, 0.99)


def rolling_origins(group: pd.DataFrame) -> list[tuple[int, list[str], str]]:
    """(k, the k smallest models, the next model) for every k from 2 to the number of sizes - 1."""
    order = group.groupby("model")["N"].first().sort_values().index.tolist()
    return [(k, order[:k], order[k]) for k in range(2, len(order))]


def _protocol_rows(protocol: str, rows: pd.DataFrame, settings: FitSettings) -> pd.DataFrame:
    return _last(rows, settings.last_k) if protocol == "model" else rows


def backtest_group(
    keys: dict[str, Any],
    group: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float] = (0.0, 0.0),
) -> pd.DataFrame:
    """Held-out points of every rolling origin of one group, with intervals at every level."""
    sign, bounds = metric_direction(keys["metric"]), laws.metric_range(keys["metric"])
    candidates = (
        ("model", laws.power_law("N", sign, bounds)),
        ("joint_code", laws.additive_law(sign, bounds)),
    )
    frames = []
    for k, fitted, following in rolling_origins(group):
        for protocol, law in candidates:
            fit_rows = _protocol_rows(protocol, group[group["model"].isin(fitted)], settings)
            held_rows = _protocol_rows(protocol, group[group["model"] == following], settings)
            done = fit_split(law, fit_rows, held_rows, settings, seed + k, spread)
            held = done.rows[done.rows["held_out"]]
            frame = held[["model", "checkpoint", "step", "final", "value"]].rename(
                columns={"value": "observed", "model": "forecast_size"}
            )
            frame = frame.assign(
                **keys,
                origin=k,
                fit_sizes="+".join(fitted),
                protocol=protocol,
                law=law.name,
                status=done.status,
                reason=done.reason,
                uncertainty=settings.uncertainty,
            )
            if done.intervals is not None:
                mask = done.rows["held_out"].to_numpy()
                frame["forecast"] = done.intervals.centre[mask]
                for level in LEVELS:
                    low, high = done.intervals.forecast_interval(level)
                    frame[f"covered@{level:g}"] = (frame["observed"] >= low[mask]) & (
                        frame["observed"] <= high[mask]
                    )
                    if level == 0.95:
                        frame["low"], frame["high"] = low[mask], high[mask]
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def summary(points: pd.DataFrame) -> pd.DataFrame:
    """Error and coverage per rolling-origin step: RMSE, MAE, bias, 95% coverage (all and final)."""
    if points.empty or "forecast" not in points:
        return pd.DataFrame()
    keys = [
        "objective",
        "attention",
        "metric",
        "split",
        "protocol",
        "law",
        "origin",
        "fit_sizes",
        "forecast_size",
    ]
    rows = []
    for values, part in points.dropna(subset=["forecast"]).groupby(keys):
        error = part["forecast"] - part["observed"]
        final = part[part["final"]]
        rows.append(
            dict(zip(keys, values, strict=True))
            | {
                "status": part["status"].iloc[0],
                "reason": part["reason"].iloc[0],
                "n": len(part),
                "rmse": float(np.sqrt((error**2).mean())),
                "mae": float(error.abs().mean()),
                "bias": float(error.mean()),
                "coverage_95": float(part["covered@0.95"].mean()),
                "final_covered_95": bool(final["covered@0.95"].all()) if len(final) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def calibration(points: pd.DataFrame) -> pd.DataFrame:
    """Nominal vs empirical coverage over all backtested points (fits that did not fail), per law."""
    if points.empty or "forecast" not in points:
        return pd.DataFrame()
    usable = points.dropna(subset=["forecast"])
    rows = []
    for (protocol, law), part in usable.groupby(["protocol", "law"]):
        for level in LEVELS:
            rows.append(
                {
                    "protocol": protocol,
                    "law": law,
                    "uncertainty": part["uncertainty"].iloc[0],
                    "nominal": level,
                    "empirical": float(part[f"covered@{level:g}"].mean()),
                    "n_points": len(part),
                    "n_backtests": part.groupby(["objective", "metric", "split", "origin"]).ngroups,
                }
            )
    return pd.DataFrame(rows)
