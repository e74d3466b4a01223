"""Forecast from any table of runs with the workflow's own engine (issue 24, item 6).

``forecast_runs`` checks the table (:mod:`.table`), adds a held-out row per requested target size
(no observation), runs every protocol, law, the model-form ensemble, the two-step forecast and the
rolling-origin backtests exactly as the fit stage does (:func:`rerank_scaling.laws.protocols.run_protocols`),
and writes to ``out``:

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

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.forecast.table import Runs, TableError, read_table, to_metrics
from rerank_scaling.laws import backtests, registry
from rerank_scaling.laws.protocols import FitSettings, run_protocols
from rerank_scaling.records import MetricSpec, metric_spec, register_metric
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


def with_targets(metrics: pd.DataFrame, targets: tuple[float, ...]) -> pd.DataFrame:
    """A held-out row without an observation per target size, at the fitted runs' final step, in every
    (metric, objective, split) group."""
    if not targets:
        return metrics
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
    """Held-out sizes (and targets) at their final step, by the headline laws (Table 8's selection)."""
    if forecasts.empty:
        return pd.DataFrame(columns=FORECAST_COLUMNS)
    sizes = forecasts["held_out"] & (forecasts["role"] == "held_out") & forecasts["final"]
    rows = forecasts[sizes & forecasts["law"].isin(registry.HEADLINE)]
    return rows.reindex(columns=FORECAST_COLUMNS).reset_index(drop=True)


def forecast_runs(
    runs: pd.DataFrame | str | Path,
    out: str | Path | None = None,
    target_sizes: tuple[float, ...] = (),
    run_sigma: float | None = None,
    metric: MetricSpec | None = None,
    bootstrap: int = 500,
    seed: int = 0,
    uncertainty: str = "run",
) -> Forecast:
    """Forecasts from a table of runs (module docstring); ``metric`` declares a metric the table's
    ``metric`` column (or its absence: "value") names that :func:`records.metric_spec` does not know;
    ``uncertainty`` is ``fitting.uncertainty`` (``iid``: the seed paper's residual bootstrap)."""
    source = str(runs) if not isinstance(runs, pd.DataFrame) else "the table"
    frame = runs if isinstance(runs, pd.DataFrame) else read_table(runs)
    if metric is not None:
        register_metric(metric)
    checked: Runs = to_metrics(frame, source, run_sigma, metric.name if metric else "value")
    _check_range(checked.metrics, source)
    settings = FitSettings(
        metrics=tuple(checked.metrics["metric"].unique()),
        last_k=1,
        holdout_last=1,
        bootstrap=bootstrap,
        seed=seed,
        run_sigma=run_sigma,
        uncertainty=uncertainty,
    )
    fits, forecasts, points = run_protocols(with_targets(checked.metrics, tuple(target_sizes)), settings)
    result = Forecast(headline(forecasts), fits, backtests.calibration(points), checked.notes, forecasts)
    if out is not None:
        write(result, checked.metrics, Path(out))
    return result


def _check_range(metrics: pd.DataFrame, source: str) -> None:
    for name, rows in metrics.groupby("metric"):
        lo, hi = metric_spec(name).range
        outside = rows[(rows["value"] < lo) | (rows["value"] > hi)]
        if len(outside):
            raise TableError(
                f"{source}: metric {name!r} has values outside its range [{lo:g}, {hi:g}] (e.g. "
                f"{outside['value'].iloc[0]:g}); declare it: --range LO HI (and --lower-is-better for a loss)"
            )


def write(result: Forecast, metrics: pd.DataFrame, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "forecasts.csv", result.forecasts.to_csv(index=False))
    write_text(
        out / "fits.csv", result.fits.drop(columns=["params_draws"], errors="ignore").to_csv(index=False)
    )
    write_text(out / "calibration.csv", result.calibration.to_csv(index=False))
    write_text(out / "answer.md", "\n".join(answer_lines(result, metrics)))


def answer_lines(result: Forecast, metrics: pd.DataFrame) -> list[str]:
    """answer.md: per metric and split, the workflow's question and forecast lines; then the notes."""
    lines = ["# Forecasts from a table of runs", ""]
    for (name, split), rows in metrics.groupby(["metric", "split"]):
        sizes = rows.groupby(["model", "role"], as_index=False)["size"].first().sort_values("size")

        def pairs(role: str, sizes: pd.DataFrame = sizes) -> tuple[tuple[str, float], ...]:
            part = sizes[sizes["role"] == role]
            return tuple(zip(part["model"], part["size"].astype(float), strict=True))

        shown = result.forecasts[(result.forecasts["metric"] == name) & (result.forecasts["split"] == split)]
        forecast = tuple(dict(zip(shown["model"], shown["size"].astype(float), strict=True)).items())
        lines += forecast_lines(Question(name, split, "size", pairs("fit"), forecast), shown)
    if result.notes:
        lines += ["## Assumed", "", *[f"- {note}" for note in result.notes], ""]
    return lines
