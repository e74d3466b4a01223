"""Held-out protocols (seed paper 000 §5-5.1), applied per (family, objective, attention, metric, split).

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
schedule on that many annotations, seed 001 §4.2), the largest fraction held out by the data and
joint_text protocols and the only one the model protocol fits. A mid-schedule checkpoint has not
decayed its learning rate, so the checkpoint curve under-states what that much data gives
(Hoffmann et al. 2022; Porian et al. 2024); fitting both shows by how much.

Seeds are averaged per (model, step) before fitting; a "run" (unit of the run-level uncertainty,
:mod:`rerank_scaling.laws.fit_statistics`) is then one model. The size axis (``fitting.size_axis``:
non-embedding or total parameters) sets N, and training FLOPs C = 6 N tokens follow the same axis.
Fits whose parameters are not identified get status ``degenerate`` with the reason
(:mod:`rerank_scaling.laws.identifiability`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws import registry
from rerank_scaling.laws.converged import converged_split, explain_refusal
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
from rerank_scaling.laws.forecast_status import StatusRule, judge, validated_ratio
from rerank_scaling.laws.identifiability import degenerate_reasons, too_few_levels

log = logging.getLogger(__name__)
GROUP_KEYS = ["family", "objective", "attention", "metric", "split", "annotations"]
PROTOCOLS = ("model", "data", "joint_text", "joint_code")
JOINT_PROTOCOLS = ("joint_text", "joint_code")
SIZE_COLUMNS = {"non_embedding": "non_embedding_params", "total": "params"}
DATA_AXES = ("checkpoints", "fractions")


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
    uncertainty: str = "run"  # or "iid" (the paper's i.i.d. bootstrap)
    joint_protocol: str = "code"  # or "text": which joint protocol planning uses
    data_axis: str = "checkpoints"  # or "fractions": the points of the data and joint laws
    run_sigma: float | None = None  # run-to-run sd when neither seeds nor spare sizes estimate it
    backtest: bool = True  # rolling-origin backtests over sizes
    validated_ratio: float | None = None  # extrapolation a forecast may make (null: the backtests')
    usable_half_width: float = 0.0  # a 95% half-width always narrow enough to decide with
    # (split, metric, oracle value of the reranked candidates): set by the fit stage from the BM25
    # runs and qrels (:mod:`rerank_scaling.laws.ceiling`), not a config key
    ceilings: tuple[tuple[str, str, float], ...] = ()

    @property
    def held_points(self) -> int:
        """Points per size the data and joint_text protocols hold out: the largest fraction on the
        fractions axis (a few runs, not a dozen checkpoints), else ``holdout_last``."""
        return 1 if self.data_axis == "fractions" else self.holdout_last

    @property
    def size_points(self) -> int:
        """Points per size the model protocol fits: the full-data run's end on the fractions axis."""
        return 1 if self.data_axis == "fractions" else self.last_k

    def __post_init__(self) -> None:
        choices = {
            "size_axis": tuple(SIZE_COLUMNS),
            "step_axis": ("step", "examples"),
            "loss": ("least_squares", "huber_log"),
            "uncertainty": ("run", "iid"),
            "joint_protocol": ("code", "text"),
            "data_axis": DATA_AXES,
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ValueError(
                    f"fitting.{key} = {getattr(self, key)!r}: choose one of {', '.join(allowed)}"
                )


@dataclass
class ProtocolOutput:
    fits: list[dict[str, Any]] = field(default_factory=list)
    forecasts: list[pd.DataFrame] = field(default_factory=list)
    backtests: list[pd.DataFrame] = field(default_factory=list)


def _selected(table: pd.DataFrame, settings: FitSettings) -> pd.DataFrame:
    rows = table[(table["family"] != "bm25") & table["metric"].isin(settings.metrics)]
    rows = rows.assign(annotations=annotation_sources(rows))  # a law per source (seed 001 §4.3)
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
    size_column = SIZE_COLUMNS[settings.size_axis]
    keys = [*GROUP_KEYS, "model", "role", "checkpoint"]
    averaged = (
        rows.assign(
            # training FLOPs on the chosen size axis: the table's are 6 * non-embedding params * tokens
            flops=rows["flops"] * rows[size_column] / rows["non_embedding_params"]
        )
        .groupby(keys, as_index=False)
        .agg(
            value=("value", "mean"),
            size=(size_column, "first"),
            step=("step", "mean"),
            examples=("examples", "mean"),
            flops=("flops", "mean"),
            seeds=("seed", "nunique"),
        )
    )
    averaged["N"] = averaged["size"] / laws.SCALES["N"]
    averaged["S"] = averaged[settings.step_axis] / laws.SCALES["S"]
    averaged["C"] = averaged["flops"] / laws.SCALES["C"]
    last = averaged.groupby([*GROUP_KEYS, "model"])["step"].transform("max")
    averaged["final"] = averaged["step"] == last
    return averaged


def seed_spread(table: pd.DataFrame, settings: FitSettings) -> dict[str, tuple[float, float]]:
    """Per metric: (pooled variance between seeds of a run's mean over its last k checkpoints, dof).

    Pooled over every group and size with replicate seeds (sum of seeds - 1 dof): the seed noise of
    one metric is shared across objectives and splits, and one size with two seeds gives 1 dof.
    """
    rows = _selected(table, settings)
    rows = rows[data_fractions(rows) == 1.0]  # checkpoints of one schedule: a fraction's differ
    # seeds are compared at the last step every seed of the size reached: a rerun that stopped
    # earlier is no replicate of another seed's later checkpoint (the OLMo ladder's 1x reruns
    # against its 10x runs gave a CE "seed spread" of 0.16)
    last = rows.groupby([*GROUP_KEYS, "model", "seed"])["step"].transform("max")
    rows = rows[rows["step"] <= last.groupby([rows[k] for k in [*GROUP_KEYS, "model"]]).transform("min")]
    rank = rows.groupby([*GROUP_KEYS, "model", "seed"])["step"].rank(method="dense", ascending=False)
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


def _last(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    return frame.sort_values(["model", "step"]).groupby("model").tail(k)


def _but_last(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """Every checkpoint of each model but its last ``k`` (keeps every column, ``model`` included).

    ``groupby(...).apply`` drops the grouping column under pandas 3, which left Table 4's rows
    without a model (issue 12); a position-from-the-end count keeps the frame whole.
    """
    ordered = frame.sort_values(["model", "step"])
    return ordered[ordered.groupby("model").cumcount(ascending=False) >= k]


def splits_for(
    protocol: str, group: pd.DataFrame, settings: FitSettings
) -> Iterator[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(label, fit rows, held-out rows) of a protocol on one group."""
    fit_sizes, held_sizes = group[group["role"] == "fit"], group[group["role"] == "held_out"]
    if protocol == "model":
        yield "model", _last(fit_sizes, settings.size_points), _last(held_sizes, settings.size_points)
    elif protocol == "data":
        for model, rows in group.groupby("model"):
            yield f"data:{model}", _but_last(rows, settings.held_points), _last(rows, settings.held_points)
    elif protocol == "joint_text":
        held = pd.concat([_last(fit_sizes, settings.held_points), held_sizes])
        yield "joint_text", _but_last(fit_sizes, settings.held_points), held
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
) -> pd.DataFrame:
    """Forecast rows (fitted and held-out points) of law ``name`` with its (centre, low, high),
    each judged by ``rule`` (:func:`rerank_scaling.laws.forecast_status.judge`)."""
    centre, low, high = interval
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
    forecast = forecast_rows(done, fit_rows, label, law.name, law.variables, (boot.centre, low, high), rule)
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


def status_rule(settings: FitSettings, backtests: pd.DataFrame, group: pd.DataFrame) -> StatusRule:
    """The forecast-status rule of a group: the configured validated ratio, else its backtests'."""
    ratio = settings.validated_ratio
    if ratio is None:
        ratio = validated_ratio(backtests, group.groupby("model")["N"].first())
    return StatusRule(ratio, settings.usable_half_width)


def fit_group(
    keys: dict[str, Any],
    group: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float] = (0.0, 0.0),
    losses: tuple[tuple[str, pd.DataFrame, tuple[float, float]], ...] = (),
) -> ProtocolOutput:
    """Every protocol and law on one (family, objective, attention, metric, split) group, and its
    rolling-origin backtests (``settings.backtest``); with ``losses`` ((loss metric, its rows of the
    same runs, its seed spread)), the two-step forecasts through each (:mod:`.two_step`)."""
    from rerank_scaling.laws.backtests import backtest_group  # backtests build on this module
    from rerank_scaling.laws.ensemble import fit_ensemble  # so does the ensemble
    from rerank_scaling.laws.two_step import fit_two_step  # and the two-step forecast

    output = ProtocolOutput()
    if settings.backtest:
        output.backtests.append(backtest_group(keys, group, settings, seed, spread))
    rule = status_rule(settings, output.backtests[0] if output.backtests else pd.DataFrame(), group)
    ceiling = ceiling_of(settings, keys)
    done = []
    for protocol in PROTOCOLS:
        for label, fit_rows, held_rows in splits_for(protocol, group, settings):
            for law in laws_for(protocol, keys["metric"], settings, ceiling):
                law_fit, law_held = converged_split(law, group, fit_rows, held_rows)
                record, forecast = fit_one(law, label, keys, law_fit, law_held, settings, seed, spread, rule)
                done.append((explain_refusal(law, record), forecast))
            if protocol == "model":  # the model-form ensemble (:mod:`.ensemble`)
                args = (fit_rows, held_rows, settings, seed, spread, rule, ceiling)
                done.append(fit_ensemble(keys, label, *args))
    for loss_metric, loss_rows, loss_spread in losses:
        done.append(fit_two_step(keys, loss_metric, loss_rows, group, settings, seed, loss_spread, rule))
    for record, forecast in done:
        # the bound every forecast of this group respects, planning's included (planning/forecast.py)
        output.fits.append({**record, "ceiling": np.nan if ceiling is None else float(ceiling)})
        if not forecast.empty:
            output.forecasts.append(forecast)
    return output


def group_jobs(table: pd.DataFrame, settings: FitSettings) -> list[tuple[Any, ...]]:
    """(keys, rows, settings, seed, seed spread, losses) of every group, in a fixed order; a rank
    metric's group carries the same runs' rows of every fitted loss (:func:`two_step.loss_metrics`)."""
    from rerank_scaling.laws.two_step import loss_metrics

    data = prepare(table, settings)
    spreads = seed_spread(table, settings)
    groups = dict(iter(data.groupby(GROUP_KEYS)))
    metric_at = GROUP_KEYS.index("metric")
    losses = loss_metrics(settings.metrics)

    def companions(values: tuple) -> tuple[tuple[str, pd.DataFrame, tuple[float, float]], ...]:
        if values[metric_at] in losses:
            return ()
        found = []
        for loss in losses:
            key = (*values[:metric_at], loss, *values[metric_at + 1 :])
            if key in groups:
                found.append((loss, groups[key], spreads.get(loss, (0.0, 0.0))))
        return tuple(found)

    return [
        (
            dict(zip(GROUP_KEYS, values, strict=True)),
            group,
            settings,
            settings.seed + index,
            spreads.get(values[metric_at], (0.0, 0.0)),
            companions(values),
        )
        for index, (values, group) in enumerate(groups.items())
    ]


def run_protocols(
    table: pd.DataFrame, settings: FitSettings, workers: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """All protocols on every group, ``workers`` groups at a time: (fits, forecasts, backtest points)."""
    from concurrent.futures import ProcessPoolExecutor

    jobs = group_jobs(table, settings)
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
    # A table whose every fit failed still has the columns of a fitted record (NaN), for the tables.
    fits = fits.reindex(columns=[*fits.columns, *(c for c in FITTED_COLUMNS if c not in fits.columns)])
    frames = [frame for out in outputs for frame in out.forecasts]
    tests = [frame for out in outputs for frame in out.backtests if len(frame)]
    return (
        fits,
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(),
        pd.concat(tests, ignore_index=True) if tests else pd.DataFrame(),
    )
