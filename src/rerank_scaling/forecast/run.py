"""Forecast from any table of runs with the workflow's own engine.

Two parts: ``forecast_runs`` is the front for a user's table: it checks the table (:mod:`.table`),
adds a held-out row per requested target size (no observation) and chooses the settings a table of
runs gets (its final values: ``last_k`` = ``holdout_last`` = 1); :func:`forecast_metrics` is the core
the fit stage of the workflow calls too (:func:`rerank_scaling.forecast.fit_stage.fit_everything`): on a
metrics table and :class:`~rerank_scaling.laws.fit_settings.FitSettings`, every protocol, law, the
model-form ensemble, the two-step forecast and the rolling-origin backtests
(:func:`rerank_scaling.laws.runner.run_protocols`), returned as a :class:`Forecast`. Written to
``out`` (the fit stage writes the first and the last into its own folder, beside its tables):

* ``forecasts.csv``: one row per held-out point and per target size, of the headline laws
  (``laws.registry.HEADLINE``): ``metric, objective, split, law, protocol, model, size, step,
  observed, forecast, low, high, covered, forecast_status, reason``;
* ``fits.csv``: every law's fit (status, reason, parameters and their intervals);
* ``calibration.csv``: the backtests' coverage per law with its exact binomial bound
  (:func:`rerank_scaling.laws.backtests.calibration`);
* ``answer.md``: the question, the forecasts in the words of the workflow's answer page
  (:func:`rerank_scaling.report.answer.forecast_lines`) and the notes on what was assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.forecast.table import Runs, TableError, known_metric, read_table, to_metrics
from rerank_scaling.laws import backtests, registry
from rerank_scaling.laws.fit_settings import GROUP_KEYS, FitSettings
from rerank_scaling.laws.protocols import prepare
from rerank_scaling.laws.runner import run_protocols
from rerank_scaling.registries.measures import MetricSpec, metric_spec, register_metric
from rerank_scaling.report.answer import Question, forecast_lines

FORECAST_COLUMNS = [
    "metric", "objective", "split", "law", "protocol", "model", "size", "step",
    "observed", "forecast", "low", "high", "covered", "forecast_status", "reason",
]  # fmt: skip


@dataclass(frozen=True)
class Forecast:
    forecasts: pd.DataFrame  # forecasts.csv: held-out sizes at their final step, headline laws
    fits: pd.DataFrame
    calibration: pd.DataFrame
    notes: tuple[str, ...]
    every: pd.DataFrame  # every protocol's and law's forecast rows (run_protocols' forecasts)
    backtests: pd.DataFrame  # the rolling-origin backtests' points (run_protocols' third table)


def with_targets(metrics: pd.DataFrame, targets: tuple[float, ...]) -> pd.DataFrame:
    """A held-out row without an observation per target size, at the fitted runs' final step, in every
    (metric, objective, split) group."""
    if not targets:
        return metrics
    for size in targets:
        if not (np.isfinite(size) and size > 0):
            raise TableError(f"--target-size {size:g}: a size is a positive parameter count; give e.g. 1e9")
    rows = []
    for _, group in metrics.groupby(["metric", "objective", "split"]):
        fitted = group[group["role"] == "fit"]
        final = float(fitted.groupby("model")["step"].max().median())
        template = fitted.iloc[0]
        for size in targets:
            rows.append(
                template.to_dict()
                | {"model": f"target {size:g}", "size": size, "params": size, "non_embedding_params": size}
                | {"role": "held_out", "value": np.nan, "step": final, "examples": final, "tokens": final}
                | {"flops": 6.0 * size * final, "checkpoint": 1.0, "seed": "0", "run": f"target {size:g}"}
            )
    return pd.concat([metrics, pd.DataFrame(rows)], ignore_index=True)


def headline(forecasts: pd.DataFrame) -> pd.DataFrame:
    """Held-out sizes (and targets) at their final step, by the headline laws (Table 8's selection).

    Columns ``FORECAST_COLUMNS``, preceded by each other group key that takes several values (a
    workflow grid with attention variants, families or annotation sources: without it two rows would
    read the same); a user's table has one value of each, so its columns are ``FORECAST_COLUMNS``."""
    if forecasts.empty:
        return pd.DataFrame(columns=FORECAST_COLUMNS)
    sizes = forecasts["held_out"] & (forecasts["role"] == "held_out") & forecasts["final"]
    rows = forecasts[sizes & forecasts["law"].isin(registry.HEADLINE)]
    return rows.reindex(columns=[*varying_keys(rows), *FORECAST_COLUMNS]).reset_index(drop=True)


def varying_keys(rows: pd.DataFrame) -> list[str]:
    """The group keys outside ``FORECAST_COLUMNS`` that take several values in ``rows``."""
    return [k for k in GROUP_KEYS if k not in FORECAST_COLUMNS and k in rows and rows[k].nunique() > 1]


def forecast_runs(
    runs: pd.DataFrame | str | Path,
    out: str | Path | None = None,
    target_sizes: tuple[float, ...] = (),
    run_sigma: float | None = None,
    metric: MetricSpec | None = None,
    bootstrap: int | None = None,
    seed: int = 0,
    uncertainty: str = "run",
) -> Forecast:
    """Forecasts from a table of runs (module docstring); ``metric`` declares a metric the table's
    ``metric`` column (or its absence: "value") names that
    :func:`rerank_scaling.registries.measures.metric_spec` does not know (its direction required:
    ``direction`` 0 is an error naming the options);
    ``uncertainty`` is ``fitting.uncertainty`` (``iid``: the seed paper's residual bootstrap);
    ``bootstrap`` None: ``fitting.bootstrap``'s default (the schema's, its one home)."""
    checked = checked_runs(runs, run_sigma, metric)
    settings = table_settings(checked.metrics, bootstrap, seed, run_sigma, uncertainty)
    table = with_targets(checked.metrics, tuple(target_sizes))
    result = replace(forecast_metrics(table, settings), notes=checked.notes)
    if out is not None:
        write(result, prepare(checked.metrics, settings), Path(out), "size")
    return result


def checked_runs(
    runs: pd.DataFrame | str | Path, run_sigma: float | None = None, metric: MetricSpec | None = None
) -> Runs:
    """A user's table (a file or a frame) read and checked (:func:`.table.to_metrics`, the metric's
    direction and range) as the engine's metrics table; ``metric`` is declared when it checks."""
    source = str(runs) if not isinstance(runs, pd.DataFrame) else "the table"
    frame = runs if isinstance(runs, pd.DataFrame) else read_table(runs)
    checked = to_metrics(frame, source, run_sigma, metric.name if metric else "value")
    _check_direction(checked.metrics, source, metric)
    if metric is not None:
        register_metric(metric)
    _check_range(checked.metrics, source)
    return checked


def table_settings(
    metrics: pd.DataFrame,
    bootstrap: int | None,
    seed: int,
    run_sigma: float | None,
    uncertainty: str = "run",
) -> FitSettings:
    """The fit settings a table of runs gets: its final values (``last_k`` = ``holdout_last`` = 1);
    ``bootstrap`` None: the schema's ``fitting.bootstrap``."""
    chosen = {} if bootstrap is None else {"bootstrap": bootstrap}
    return FitSettings.of(
        metrics=tuple(metrics["metric"].unique()),
        last_k=1,
        holdout_last=1,
        seed=seed,
        run_sigma=run_sigma,
        uncertainty=uncertainty,
        **chosen,
    )


def forecast_metrics(metrics: pd.DataFrame, settings: FitSettings, workers: int = 1) -> Forecast:
    """The engine on a long metrics table (the workflow's ``metrics/all.parquet`` or a user's table
    turned into its columns by :func:`.table.to_metrics`): every protocol and law of
    :func:`~rerank_scaling.laws.runner.run_protocols`, ``workers`` groups at a time, the headline
    forecasts at the held-out sizes (:func:`headline`) and the backtests' calibration
    (:func:`rerank_scaling.laws.backtests.calibration`). The fit stage and ``forecast_runs`` both call it."""
    fits, forecasts, points = run_protocols(metrics, settings, workers)
    return Forecast(headline(forecasts), fits, backtests.calibration(points), (), forecasts, points)


def _check_range(metrics: pd.DataFrame, source: str) -> None:
    for name, rows in metrics.groupby("metric"):
        lo, hi = metric_spec(name).range
        outside = rows[(rows["value"] < lo) | (rows["value"] > hi)]
        if len(outside):
            raise TableError(
                f"{source}: metric {name!r} has values outside its range [{lo:g}, {hi:g}] (e.g. "
                f"{outside['value'].iloc[0]:g}); declare it: --range LO HI (and --lower-is-better for a loss)"
            )


def _check_direction(metrics: pd.DataFrame, source: str, declared: MetricSpec | None) -> None:
    """A metric whose name says nothing of its direction must be declared: a loss fitted as a score
    forecasts the wrong way (a falling curve read as a rising one's bound)."""
    for name in metrics["metric"].unique():
        if not known_metric(name) and (declared is None or declared.name != name or not declared.direction):
            raise TableError(
                f"{source}: metric {name!r} is not one whose direction the pipeline knows; declare it: "
                "--lower-is-better (a loss) or --higher-is-better (a score), with --range LO HI if not [0, 1]"
            )


def write(result: Forecast, points: pd.DataFrame, out: Path, size_axis: str) -> None:
    """Every file of the module docstring (:func:`write_answer`'s two, fits.csv, calibration.csv)."""
    write_answer(result, points, out, size_axis)
    write_text(
        out / "fits.csv", result.fits.drop(columns=["params_draws"], errors="ignore").to_csv(index=False)
    )
    write_text(out / "calibration.csv", result.calibration.to_csv(index=False))


def write_answer(result: Forecast, points: pd.DataFrame, out: Path, size_axis: str) -> None:
    """forecasts.csv and answer.md; ``points`` are the fitted points
    (:func:`~rerank_scaling.laws.protocols.prepare`), ``size_axis`` a key of
    :func:`rerank_scaling.report.answer.axis_label` naming their N."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "forecasts.csv", result.forecasts.to_csv(index=False))
    write_text(out / "answer.md", "\n".join(answer_lines(result, points, size_axis)))


def answer_lines(result: Forecast, points: pd.DataFrame, size_axis: str = "size") -> list[str]:
    """answer.md: per metric and split of the fitted ``points``, the workflow's question and forecast
    lines; then the notes."""
    lines = ["# Forecasts from a table of runs", ""]
    for (name, split), rows in points.groupby(["metric", "split"]):
        sizes = rows.groupby(["model", "role"], as_index=False)["size"].first().sort_values("size")

        def pairs(role: str, sizes: pd.DataFrame = sizes) -> tuple[tuple[str, float], ...]:
            part = sizes[sizes["role"] == role]
            return tuple(zip(part["model"], part["size"].astype(float), strict=True))

        shown = result.forecasts[(result.forecasts["metric"] == name) & (result.forecasts["split"] == split)]
        for key in varying_keys(shown):  # say which variant a row is, as forecasts.csv does
            shown = shown.assign(objective=shown["objective"] + f", {key} " + shown[key].astype(str))
        forecast = tuple(dict(zip(shown["model"], shown["size"].astype(float), strict=True)).items())
        lines += forecast_lines(Question(name, split, size_axis, pairs("fit"), forecast), shown)
    if result.notes:
        lines += ["## Assumed", "", *[f"- {note}" for note in result.notes], ""]
    return lines
