"""Paper-style tables from the fits, each written as CSV, Markdown and LaTeX."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_text

KEYS = ["objective", "attention", "metric", "split"]


def forecast_errors_by_axis(fits: pd.DataFrame) -> pd.DataFrame:
    """Held-out RMSE / MAE / bias / coverage of the main law of each protocol."""
    main = fits[
        (fits["status"] == "ok") & fits["law"].isin(["power_N", "power_S", "additive", "multiplicative"])
    ]
    if main.empty:
        return pd.DataFrame()
    return main.groupby([*KEYS, "protocol", "law"], as_index=False)[
        ["rmse", "mae", "bias", "coverage"]
    ].mean()


def diagnostics(fits: pd.DataFrame) -> pd.DataFrame:
    """R^2, adjusted R^2, significance and parameter intervals of every successful fit."""
    ok = fits[fits["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame()
    rows = ok[[*KEYS, "split_label", "law", "n_fit", "r2", "adj_r2", "significance"]].copy()
    rows["params (95% CI)"] = [
        ", ".join(
            f"{k}={v:.3g} [{json.loads(lo)[k]:.3g}, {json.loads(hi)[k]:.3g}]"
            for k, v in json.loads(p).items()
        )
        for p, lo, hi in zip(ok["params"], ok["params_low"], ok["params_high"], strict=True)
    ]
    return rows


def observed_vs_forecast(forecasts: pd.DataFrame) -> pd.DataFrame:
    """Held-out points of the model-scaling and joint protocols: observed, forecast, interval, covered."""
    held = forecasts[forecasts["held_out"] & forecasts["law"].isin(["power_N", "additive"])]
    return held[[*KEYS, "law", "model", "step", "observed", "forecast", "low", "high", "covered"]]


def exponents(fits: pd.DataFrame) -> pd.DataFrame:
    """Fitted exponents of the power laws (c for single-variable laws, alpha/beta for the joint law)."""
    rows = []
    for _, fit in fits[
        (fits["status"] == "ok") & fits["law"].isin(["power_N", "power_S", "additive"])
    ].iterrows():
        p = json.loads(fit["params"])
        rows.append(
            {
                **{k: fit[k] for k in KEYS},
                "split_label": fit["split_label"],
                "law": fit["law"],
                **{k: p[k] for k in ("c", "alpha", "beta") if k in p},
            }
        )
    return pd.DataFrame(rows)


def write_all(tables: dict[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Write each table as <name>.csv, <name>.md and <name>.tex; returns the paths written."""
    out_dir = Path(out_dir)
    written = []
    for name, table in tables.items():
        for suffix, text in (
            (".csv", table.to_csv(index=False)),
            (".md", table.to_markdown(index=False, floatfmt=".4g") if len(table) else "(empty)\n"),
            (".tex", table.to_latex(index=False, float_format="%.4g") if len(table) else "% empty\n"),
        ):
            path = out_dir / f"{name}{suffix}"
            write_text(path, text)
            written.append(path)
    return written
