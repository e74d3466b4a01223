"""The paper's tables (Scaling Laws for Cross-Encoder Reranking), regenerated from a run, each written as CSV,
Markdown and LaTeX.

Every error table is per held-out size, never pooled over sizes, and every row carries the fit's
``status`` (ok / degenerate / failed) and ``reason``:

* Tables 1/2 (model scaling), 6/7 (joint law), 11/12 (multiplicative ablation), 13/14 (data scaling,
  per size): RMSE, MAE, bias and 95% coverage of the held-out points, with the fit's significance;
* Table 8: observed, forecast and 95% interval at the final checkpoint of each held-out size, and
  "k of n covered" per (metric, split, protocol, law), as the paper's "10 of 12";
* Tables 9/10: R^2 and adjusted R^2 (adjusted R^2 and the F-test on independent runs, see
  :mod:`rerank_scaling.laws.fit_statistics`);
* Table 3: the allocation exponents alpha, beta; Table 4: N / N*(C) per model at its final checkpoint;
* Table 5: the equal-compute comparison (``equal_compute``);
* beyond the paper: rolling-origin ``backtests`` and their ``calibration``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.laws import registry
from rerank_scaling.laws.fit_settings import GROUP_KEYS

KEYS = GROUP_KEYS[1:]  # objective, attention, metric, split, annotation source
FIT_COLUMNS = ["status", "reason", "significance", "p_value", "n_units"]


def _fit_info(fits: pd.DataFrame) -> pd.DataFrame:
    columns = [c for c in [*KEYS, "split_label", "law", *FIT_COLUMNS] if c in fits.columns]
    return fits[columns]


def errors_per_held_out_size(
    fits: pd.DataFrame, forecasts: pd.DataFrame, protocols: tuple[str, ...], laws: tuple[str, ...]
) -> pd.DataFrame:
    """RMSE / MAE / bias / coverage of each held-out size's points, with the fit's status."""
    if forecasts.empty:
        return pd.DataFrame()
    held = forecasts[
        forecasts["held_out"] & forecasts["protocol"].isin(protocols) & forecasts["law"].isin(laws)
    ].copy()
    if held.empty:
        return pd.DataFrame()
    held["error"] = held["forecast"] - held["observed"]
    held["squared"] = held["error"] ** 2
    held["absolute"] = held["error"].abs()
    keys = [*KEYS, "protocol", "split_label", "law", "model"]
    table = held.groupby(keys, as_index=False).agg(
        n=("error", "size"),
        rmse=("squared", "mean"),
        mae=("absolute", "mean"),
        bias=("error", "mean"),
        coverage=("covered", "mean"),
    )
    table["rmse"] = table["rmse"] ** 0.5
    table = table.rename(columns={"model": "held_out_size"})
    return table.merge(_fit_info(fits), on=[*KEYS, "split_label", "law"], how="left")


def final_checkpoint(forecasts: pd.DataFrame) -> pd.DataFrame:
    """Table 8: each held-out size at its final checkpoint, and "k of n covered" per setting; with
    each forecast's ``forecast_status`` and ``reason`` (:mod:`rerank_scaling.laws.forecast_status`),
    its extrapolation ratio and the fit's own ``status`` (diagnostics of its parameters)."""
    if forecasts.empty:
        return pd.DataFrame()
    rows = forecasts[
        forecasts["held_out"]
        & forecasts["final"]
        & forecasts["law"].isin(registry.HEADLINE)
        & forecasts["protocol"].isin(["model", "joint_code", "joint_text"])
        & (forecasts["role"] == "held_out")
    ]
    table = rows[
        [
            *KEYS,
            "protocol",
            "law",
            "model",
            "step",
            "observed",
            "forecast",
            "low",
            "high",
            "covered",
            "forecast_status",
            "extrapolation",
            "status",
            "reason",
        ]
    ].copy()
    counts = table.groupby(["metric", "split", "protocol", "law"])["covered"].agg(["sum", "size"])
    label = (counts["sum"].astype(int).astype(str) + " of " + counts["size"].astype(str)).rename(
        "k_of_n_covered"
    )
    return table.merge(label.reset_index(), on=["metric", "split", "protocol", "law"], how="left")


def goodness_of_fit(fits: pd.DataFrame) -> pd.DataFrame:
    """Tables 9/10: R^2, adjusted R^2, F-test and parameter intervals of every fit (failed ones too)."""
    if fits.empty:
        return pd.DataFrame()
    columns = [*KEYS, "protocol", "split_label", "law", "status", "reason", "n_fit", "n_units"]
    columns += [c for c in ("r2", "adj_r2", "f_stat", "p_value", "significance") if c in fits.columns]
    rows = fits[columns].copy()
    rows["params (95% CI)"] = [
        ", ".join(
            f"{k}={v:.3g} [{json.loads(lo)[k]:.3g}, {json.loads(hi)[k]:.3g}]"
            for k, v in json.loads(p).items()
        )
        if isinstance(p, str)
        else ""
        for p, lo, hi in zip(
            fits.get("params", pd.Series([None] * len(fits))),
            fits.get("params_low", pd.Series([None] * len(fits))),
            fits.get("params_high", pd.Series([None] * len(fits))),
            strict=True,
        )
    ]
    return rows


def exponents(fits: pd.DataFrame) -> pd.DataFrame:
    """Fitted exponents of the power laws (c for single-variable laws, alpha/beta for the joint law)."""
    rows = []
    chosen = fits[
        fits["law"].isin([registry.POWER_N, registry.POWER_S, registry.ADDITIVE]) & fits["params"].notna()
    ]
    for _, fit in chosen.iterrows():
        p = json.loads(fit["params"])
        rows.append(
            {
                **{k: fit[k] for k in KEYS},
                "split_label": fit["split_label"],
                "law": fit["law"],
                "status": fit["status"],
                **{k: p[k] for k in ("c", "alpha", "beta") if k in p},
            }
        )
    return pd.DataFrame(rows)


def allocation_exponents(allocation: pd.DataFrame) -> pd.DataFrame:
    """Table 3: alpha (N* ~ C^alpha) and beta (D* ~ C^beta) per joint fit, with status and reason."""
    if allocation.empty:
        return pd.DataFrame()
    keys = [*KEYS, "protocol"]
    return allocation.groupby(keys, as_index=False).agg(
        alpha=("alpha", "first"),
        beta=("beta", "first"),
        status=("status", "first"),
        reason=("reason", "first"),
    )


def n_over_n_star(allocation: pd.DataFrame) -> pd.DataFrame:
    """Table 4: N / N*(C) of each model at its final checkpoint (the ``model`` column kept)."""
    if allocation.empty or "model" not in allocation.columns:
        return pd.DataFrame()
    keys = [*KEYS, "protocol", "model"]
    last = allocation.dropna(subset=["model"]).sort_values("step").groupby(keys, as_index=False).tail(1)
    columns = [*keys, "step", "size", "compute", "n_star", "n_over_n_star", "status", "reason"]
    return last[columns].sort_values([*KEYS, "protocol", "size"], ignore_index=True)


def all_tables(
    fits: pd.DataFrame,
    forecasts: pd.DataFrame,
    allocation: pd.DataFrame,
    compared: pd.DataFrame,
    backtest_summary: pd.DataFrame,
    calibration: pd.DataFrame,
) -> dict[str, pd.DataFrame]:
    """Every table of the fit stage by name (the names of ``laws.fit_settings.TABLES``)."""
    model = errors_per_held_out_size(fits, forecasts, ("model",), (registry.POWER_N, registry.FANG_N))
    joint = errors_per_held_out_size(fits, forecasts, ("joint_code", "joint_text"), (registry.ADDITIVE,))
    multiplicative = errors_per_held_out_size(
        fits, forecasts, ("joint_code", "joint_text"), (registry.MULTIPLICATIVE,)
    )
    data = errors_per_held_out_size(fits, forecasts, ("data",), (registry.POWER_S, registry.FANG_S))
    main = [t for t in (model, data, joint, multiplicative) if len(t)]
    return {
        "forecast_errors": pd.concat(main, ignore_index=True) if main else pd.DataFrame(),
        "exponents": exponents(fits) if len(fits) else pd.DataFrame(),
        "equal_compute": compared,
        "table01_02_model_errors": model,
        "table03_allocation_exponents": allocation_exponents(allocation),
        "table04_n_over_n_star": n_over_n_star(allocation),
        "table06_07_joint_errors": joint,
        "table08_final_checkpoint": final_checkpoint(forecasts),
        "table09_10_goodness_of_fit": goodness_of_fit(fits),
        "table11_12_multiplicative_errors": multiplicative,
        "table13_14_data_errors": data,
        "backtests": backtest_summary,
        "calibration": calibration,
    }


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
