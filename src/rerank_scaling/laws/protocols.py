"""Held-out protocols (Scaling Laws for Cross-Encoder Reranking §5-5.1), applied per (family, objective,
attention, metric, split).

* ``model`` scaling: fit on the last ``last_k`` checkpoints of sizes with role ``fit``; forecast the
  sizes with role ``held_out`` at their last ``last_k`` checkpoints (law in N);
* ``data`` scaling, per size: fit all but the last ``holdout_last`` checkpoints, forecast those (law in S);
* joint scaling, two protocols, both fitting the additive joint law (and, on the same split, the
  multiplicative ablation, Fang et al.'s joint law for losses, and the BNSL over FLOPs):
  ``joint_text`` (the paper's text): hold out the last ``holdout_last`` checkpoints of every fit
  size and every checkpoint of held-out sizes; ``joint_code`` (the paper's released code): fit
  every checkpoint of the fit sizes, forecast every checkpoint of the held-out sizes. Config
  ``fitting.joint_protocol`` names the one planning uses (column ``planning`` of fits.parquet).

The data axis (``fitting.data_axis``): ``checkpoints`` (the paper's protocol) reads the law in S
off the checkpoints of each full-data run; ``fractions`` fits every protocol on the final checkpoint
of each data-fraction run (``training.data_fractions``: a model trained to the end of its own
schedule on that many annotations, Fang et al., Scaling Laws for Dense Retrieval §4.2), the largest fraction
held out by the data and joint_text protocols and the only one the model protocol fits. A mid-schedule
checkpoint has not decayed its learning rate, so the checkpoint curve under-states what that much data gives
(Hoffmann et al. 2022; Porian et al. 2024); fitting both shows by how much.

Seeds are averaged per (model, step) before fitting -- aligned by their training step, never by a
checkpoint's rank: a step only one seed measured stays that seed's point, so every point is one some
run measured (:func:`prepare`); a "run" (unit of the run-level uncertainty,
:mod:`rerank_scaling.laws.fit_statistics`) is then one model. Noise estimates read the fitted sizes
only (:func:`seed_spread`): a held-out size's replicates are what the forecast is judged on.
The size axis (``fitting.size_axis``: non-embedding or total parameters) sets N, and training
FLOPs C = 6 N tokens follow the same axis.
Fits whose parameters are not identified get status ``degenerate`` with the reason
(:mod:`rerank_scaling.laws.identifiability`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws import registry
from rerank_scaling.laws.fit_settings import GROUP_KEYS, PROTOCOLS, FitSettings
from rerank_scaling.laws.fit_statistics import (
    Intervals,
    VarianceComponents,
    forecast_errors,
    goodness_of_fit,
    iid_bootstrap,
    run_bootstrap,
    variance_components,
)
from rerank_scaling.laws.fitting import FitResult, fit_law
from rerank_scaling.laws.forecast_status import StatusRule, judge
from rerank_scaling.laws.identifiability import degenerate_reasons, too_few_levels
from rerank_scaling.registries.size_axes import size_column

log = logging.getLogger(__name__)


def _selected(table: pd.DataFrame, settings: FitSettings) -> pd.DataFrame:
    rows = table[(table["family"] != "bm25") & table["metric"].isin(settings.metrics)]
    rows = rows.assign(annotations=annotation_sources(rows))  # a law per source (Fang et al., §4.3)
    return rows[rows["split"].isin(settings.splits)] if settings.splits else rows


def annotation_sources(rows: pd.DataFrame) -> pd.Series:
    """Each row's annotation source (``human`` for tables written before the axis existed)."""
    if "annotations" not in rows.columns:
        return pd.Series("human", index=rows.index, dtype=object)
    return rows["annotations"].astype(object).fillna("human")


def data_fractions(rows: pd.DataFrame) -> pd.Series:
    """Each row's data fraction (1 for tables written before the data axis existed)."""
    if "data_fraction" not in rows.columns:
        return pd.Series(1.0, index=rows.index)
    return rows["data_fraction"].fillna(1.0)


def on_data_axis(rows: pd.DataFrame, axis: str) -> pd.DataFrame:
    """The points along the data axis: ``checkpoints``: every checkpoint of the full-data runs;
    ``fractions``: each run's final checkpoint, numbered by its fraction's rank (1 = smallest)."""
    fraction = data_fractions(rows)
    if axis == "checkpoints":
        return rows[fraction == 1.0]
    ends = rows[rows["checkpoint"] == rows.groupby("run")["checkpoint"].transform("max")]
    ranks = data_fractions(ends).groupby([ends[k] for k in [*GROUP_KEYS, "model"]]).rank(method="dense")
    return ends.assign(checkpoint=ranks.astype(int))


def prepare(table: pd.DataFrame, settings: FitSettings) -> pd.DataFrame:
    """Points of the chosen metrics/splits along ``settings.data_axis`` (:func:`on_data_axis`),
    seeds averaged, with scaled N, S and C."""
    rows = on_data_axis(_selected(table, settings), settings.data_axis)
    column = size_column(settings.size_axis)
    # seeds meet at a step (checkpoints axis) or a data fraction (fractions axis: ``checkpoint`` is
    # the fraction's rank), never at a checkpoint's rank within its run
    align, other = ("step", "checkpoint") if settings.data_axis == "checkpoints" else ("checkpoint", "step")
    keys = [*GROUP_KEYS, "model", "role", align]
    averaged = (
        rows.assign(
            # training FLOPs on the chosen size axis: the table's are 6 * non-embedding params * tokens
            flops=rows["flops"] * rows[column] / rows["non_embedding_params"]
        )
        .groupby(keys, as_index=False)
        .agg(
            value=("value", "mean"),
            size=(column, "first"),
            **{other: (other, "min" if other == "checkpoint" else "mean")},
            examples=("examples", "mean"),
            flops=("flops", "mean"),
            seeds=("seed", "nunique"),
        )
    )
    order = [*GROUP_KEYS, "model", "role", "checkpoint", "value", "size", "step"]
    averaged = averaged[[*order, "examples", "flops", "seeds"]]
    averaged["N"] = averaged["size"] / laws.SCALES["N"]
    averaged["S"] = averaged[settings.step_axis] / laws.SCALES["S"]
    averaged["C"] = averaged["flops"] / laws.SCALES["C"]
    last = averaged.groupby([*GROUP_KEYS, "model"])["step"].transform("max")
    averaged["final"] = averaged["step"] == last
    return averaged


def seed_spread(table: pd.DataFrame, settings: FitSettings) -> dict[str, tuple[float, float]]:
    """Per metric: (pooled variance between seeds of a run's mean over its last k checkpoints, dof).

    Pooled over every group and fitted size with replicate seeds (sum of seeds - 1 dof): the seed
    noise of one metric is shared across objectives and splits, and one size with two seeds gives 1
    dof. Held-out sizes never count: their replicates are the observations a forecast is judged on.
    Seeds are compared at the steps every seed of the size measured (:func:`common_steps`), the last
    k of them: a rerun that stopped earlier is no replicate of another seed's later checkpoint (the
    OLMo ladder's 1x reruns against its 10x runs gave a CE "seed spread" of 0.16), nor is a
    checkpoint at another step one of the same rank.
    """
    rows = _selected(table, settings)
    rows = rows[(data_fractions(rows) == 1.0) & (rows["role"] == "fit")]  # one schedule, fitted sizes
    rows = common_steps(rows, [*GROUP_KEYS, "model"])
    rank = rows.groupby([*GROUP_KEYS, "model"])["step"].rank(method="dense", ascending=False)
    means = (
        rows[rank <= settings.last_k].groupby([*GROUP_KEYS, "model", "seed"], as_index=False)["value"].mean()
    )
    spread = means.groupby([*GROUP_KEYS, "model"])["value"].agg(["var", "count"]).dropna()
    spread = spread[spread["count"] > 1].reset_index()
    result = {}
    for metric, part in spread.groupby("metric"):
        dof = (part["count"] - 1).to_numpy(float)
        result[metric] = (float((part["var"] * dof).sum() / dof.sum()), float(dof.sum()))
    return result


def common_steps(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rows at steps that every seed of their ``keys`` group measured (none for a single seed's
    group beyond its own steps: one seed measures all of its steps)."""
    seeds = rows.groupby(keys)["seed"].transform("nunique")
    at_step = rows.groupby([*keys, "step"])["seed"].transform("nunique")
    return rows[at_step == seeds]


def last_checkpoints(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    return frame.sort_values(["model", "step"]).groupby("model").tail(k)


def but_last_checkpoints(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """Every checkpoint of each model but its last ``k`` (keeps every column, ``model`` included).

    ``groupby(...).apply`` drops the grouping column under pandas 3, which left Table 4's rows
    without a model; a position-from-the-end count keeps the frame whole.
    """
    ordered = frame.sort_values(["model", "step"])
    return ordered[ordered.groupby("model").cumcount(ascending=False) >= k]


def splits_for(
    protocol: str, group: pd.DataFrame, settings: FitSettings
) -> Iterator[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(label, fit rows, held-out rows) of a protocol on one group."""
    fit_sizes, held_sizes = group[group["role"] == "fit"], group[group["role"] == "held_out"]
    if protocol == "model":
        yield (
            "model",
            last_checkpoints(fit_sizes, settings.size_points),
            last_checkpoints(held_sizes, settings.size_points),
        )
    elif protocol == "data":
        for model, rows in group.groupby("model"):
            yield (
                f"data:{model}",
                but_last_checkpoints(rows, settings.held_points),
                last_checkpoints(rows, settings.held_points),
            )
    elif protocol == "joint_text":
        held = pd.concat([last_checkpoints(fit_sizes, settings.held_points), held_sizes])
        yield "joint_text", but_last_checkpoints(fit_sizes, settings.held_points), held
    elif protocol == "joint_code":
        yield "joint_code", fit_sizes, held_sizes
    else:
        raise ValueError(f"unknown protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")


def laws_for(
    protocol: str, metric: str, settings: FitSettings, ceiling: float | None = None
) -> list[laws.Law]:
    """Which laws each protocol fits for a metric (:func:`rerank_scaling.laws.registry.laws_for`)."""
    return registry.laws_for(protocol, metric, settings.bnsl_breaks, ceiling)


def ceiling_of(settings: FitSettings, keys: dict[str, Any]) -> float | None:
    """The reranking ceiling of a group's (split, metric), None when none is known."""
    found = [v for s, m, v in settings.ceilings if (s, m) == (keys["split"], keys["metric"])]
    return found[0] if found else None


def _variables(rows: pd.DataFrame, law: laws.Law) -> dict[str, np.ndarray]:
    return {v: rows[v].to_numpy(float) for v in law.variables}


#: Columns only a fitted (not failed) record has; see :func:`run_protocols`.
FITTED_COLUMNS = (
    "params", "params_low", "params_high", "r2", "adj_r2", "f_stat", "p_value", "significance",
    "n_dof_units", "bootstrap_ok", "interval_basis", "sigma_run", "sigma_run_dof", "sigma_checkpoint",
    "coverage",
)  # fmt: skip


@dataclass
class SplitFit:
    """One law fitted on one protocol split, with its diagnostics and bootstrap draws."""

    result: FitResult
    status: str
    reason: str
    rows: pd.DataFrame  # fit rows then held-out rows, column ``held_out``
    quality: Any = None
    intervals: Intervals | None = None
    components: VarianceComponents | None = None
    #: variables with fewer distinct values than the law needs: its forecast, not just a parameter,
    #: is then unidentified (identifiability.too_few_levels), and the ensemble leaves it out
    too_few_levels: tuple[str, ...] = ()


def fit_split(
    law: laws.Law,
    fit_rows: pd.DataFrame,
    held_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float] = (0.0, 0.0),
) -> SplitFit:
    """Fit ``law``, bootstrap it (``settings.uncertainty``) and judge whether it is identified."""
    x, y = _variables(fit_rows, law), fit_rows["value"].to_numpy(float)
    result = fit_law(law, x, y, settings.loss, settings.huber_delta)
    both = pd.concat([fit_rows.assign(held_out=False), held_rows.assign(held_out=True)], ignore_index=True)
    if not result.ok:
        return SplitFit(result, result.status, result.reason, both)
    units = fit_rows["model"].to_numpy()
    x_all = _variables(both, law)
    residuals = y - law.predict(result.params, x)
    components = variance_components(
        residuals,
        units,
        len(law.params),
        spread,
        settings.run_sigma,
        spread_points=settings.last_k,
        weights=fit_rows["seeds"].to_numpy(float),
    )
    if settings.uncertainty == "iid":
        quality = goodness_of_fit(y, law.predict(result.params, x), len(law.params))
        intervals = iid_bootstrap(law, result, x, y, x_all, settings.bootstrap, seed, settings.loss)
    else:
        # within one run (the data protocol) the checkpoints are the only units there are
        quality = goodness_of_fit(
            y, law.predict(result.params, x), len(law.params), units if len(set(units)) > 1 else None
        )
        intervals = run_bootstrap(
            law,
            result,
            x,
            units,
            x_all,
            both["model"].to_numpy(),
            components,
            fit_rows["seeds"].to_numpy(float),
            settings.bootstrap,
            seed,
            settings.loss,
        )
    reason = degenerate_reasons(law, result.params, x, y, intervals.params)
    if not intervals.successes:
        reason = "; ".join(filter(None, [reason, "no bootstrap refit converged"]))
    # the prefix reaches every table and figure that quotes the reason (planning's too)
    status, reason = ("degenerate", f"not identifiable: {reason}") if reason else ("ok", "")
    levels = tuple(too_few_levels(law, x))
    return SplitFit(result, status, reason, both, quality, intervals, components, levels)


def forecast_rows(
    done: SplitFit,
    fit_rows: pd.DataFrame,
    label: str,
    name: str,
    variables: tuple[str, ...],
    interval: tuple[np.ndarray, np.ndarray, np.ndarray],
    rule: StatusRule,
    inner: tuple[np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Forecast rows (fitted and held-out points) of law ``name``: (centre, low, high), ``inner`` the
    80% interval (low_80, high_80; NaN if None), judged by :func:`.forecast_status.judge`."""
    centre, low, high = interval
    low_80, high_80 = inner if inner is not None else (np.full_like(low, np.nan),) * 2
    both = done.rows
    columns = [*GROUP_KEYS, "model", "role", "checkpoint", "step", "examples", "size", "flops", "seeds"]
    forecast = both[[*columns, "final", "value", "held_out"]].rename(columns={"value": "observed"})
    forecast = forecast.assign(
        protocol=label.split(":")[0],
        split_label=label,
        law=name,
        status=done.status,
        forecast=centre,
        low=low,
        high=high,
        low_80=low_80,
        high_80=high_80,
    )
    forecast["covered"] = (forecast["observed"] >= forecast["low"]) & (
        forecast["observed"] <= forecast["high"]
    )
    judged = judge(
        both.assign(forecast=centre, low=low, high=high), fit_rows, variables, rule, done.status, done.reason
    )
    return forecast.join(judged)


def fit_one(
    law: laws.Law,
    label: str,
    keys: dict[str, Any],
    fit_rows: pd.DataFrame,
    held_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float] = (0.0, 0.0),
    rule: StatusRule | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Fit, diagnose, forecast and bootstrap one law on one protocol split: (fits row, forecast rows),
    each forecast row judged by ``rule`` (:mod:`rerank_scaling.laws.forecast_status`)."""
    rule = rule or StatusRule(settings.validated_ratio or 1.0, settings.usable_half_width)
    done = fit_split(law, fit_rows, held_rows, settings, seed, spread)
    protocol = label.split(":")[0]
    record = {
        **keys,
        "protocol": protocol,
        "split_label": label,
        "law": law.name,
        "formula": law.formula,
        "status": done.status,
        "reason": done.reason,
        "planning": protocol == f"joint_{settings.joint_protocol}",
        "uncertainty": settings.uncertainty,
        "n_fit": len(fit_rows),
        "n_held_out": len(held_rows),
        "n_units": int(fit_rows["model"].nunique()),
    }
    if done.intervals is None:
        return record, pd.DataFrame()
    result, boot = done.result, done.intervals
    low, high = boot.forecast_interval(0.95)
    params_low, params_high = boot.parameter_interval(0.95)
    interval, inner = (boot.centre, low, high), boot.forecast_interval(0.8)
    forecast = forecast_rows(done, fit_rows, label, law.name, law.variables, interval, rule, inner)
    held = forecast[forecast["held_out"]]
    names = law.params
    record.update(
        {
            "params": json.dumps(dict(zip(names, map(float, result.params), strict=True))),
            "params_low": json.dumps(dict(zip(names, map(float, params_low), strict=True))),
            "params_high": json.dumps(dict(zip(names, map(float, params_high), strict=True))),
            "r2": done.quality.r2,
            "adj_r2": done.quality.adj_r2,
            "f_stat": done.quality.f_stat,
            "p_value": done.quality.p_value,
            "significance": done.quality.stars,
            "n_dof_units": done.quality.n_units,
            "bootstrap_ok": boot.successes,
            "interval_basis": boot.basis,
            "sigma_run": float(np.sqrt(done.components.tau2)),
            "sigma_run_dof": float(done.components.tau_dof),
            "sigma_checkpoint": float(np.sqrt(done.components.sigma2)),
            "coverage": float(held["covered"].mean()) if len(held) else float("nan"),
            "validated_ratio": rule.validated_ratio,  # planning's range (planning/forecast.py)
            "params_draws": json.dumps(boot.params.tolist()) if record["planning"] else None,
            **forecast_errors(held["observed"], held["forecast"]),
        }
    )
    return record, forecast
