"""Run every held-out protocol, law, the model-form ensemble, the two-step forecast and the
rolling-origin backtests on every (family, objective, attention, metric, split, annotations) group of
a metrics table: the engine behind the fit stage and ``rerank-scaling forecast``. The top floor of
:mod:`rerank_scaling.laws`: it builds on :mod:`.protocols`, :mod:`.backtests`, :mod:`.ensemble` and
:mod:`.two_step`, none of which imports it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws.backtests import backtest_group
from rerank_scaling.laws.converged import converged_split, explain_refusal
from rerank_scaling.laws.ensemble import fit_ensemble
from rerank_scaling.laws.fit_settings import GROUP_KEYS, PROTOCOLS, FitSettings
from rerank_scaling.laws.forecast_status import StatusRule, last_segment, validated_ratio
from rerank_scaling.laws.protocols import (
    FITTED_COLUMNS,
    ceiling_of,
    fit_one,
    laws_for,
    prepare,
    seed_spread,
    splits_for,
)
from rerank_scaling.laws.two_step import fit_two_step, loss_metrics

log = logging.getLogger(__name__)


@dataclass
class ProtocolOutput:
    fits: list[dict[str, Any]] = field(default_factory=list)
    forecasts: list[pd.DataFrame] = field(default_factory=list)
    backtests: list[pd.DataFrame] = field(default_factory=list)


def status_rule(settings: FitSettings, backtests: pd.DataFrame, group: pd.DataFrame) -> StatusRule:
    """The forecast-status rule of a group: the configured validated ratio, else its backtests';
    and what its last rolling origin says of the ladder's top segment."""
    sizes = group.groupby("model")["N"].first()
    ratio = settings.validated_ratio
    if ratio is None:
        ratio = validated_ratio(backtests, sizes)
    return StatusRule(ratio, settings.usable_half_width, last_segment(backtests, sizes))


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
