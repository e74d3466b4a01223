"""Is the held-out size's final checkpoint forecast within the size gap, and is the metric precise
enough to tell?

For every (objective, attention, split) with a held-out size, the forecast of its final checkpoint
(paper Table 8, :func:`rerank_scaling.laws.law_tables.final_checkpoint`) is compared with the yardstick
a planner cares about: the observed gap between the two largest sizes' final values (the held-out
size and the largest fitted one). A forecast is useful when it misses by less than that gap, and
its 95% interval covers the observation. The gap is signed: when the held-out size ends at or below
the largest fitted one, no miss is within it (the law, fitted to sizes that improve, cannot tell that
step apart), so ``miss_within_gap`` is False whatever the miss. The gap itself is only visible when
the final value is precise: the standard error over queries of each of the two runs (a query bootstrap,
:func:`rerank_scaling.report.scaling_evidence.final_standard_errors`) should be below a third of the gap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.report.scaling_evidence import final_rows

# What summary.md and the README say when there is nothing to check.
NO_CHECK = (
    "(no forecast of a held-out size: the grid has no held-out size, or no law fitted to the other "
    "sizes forecast it; see laws/tables/table08_final_checkpoint.csv and laws/fits.parquet)"
)


def _largest_fitted(finals: pd.DataFrame, held_out: str) -> pd.Series | None:
    """The final row of the largest size below ``held_out`` (seeds averaged), or None."""
    fitted = finals[finals["model"] != held_out]
    if fitted.empty:
        return None
    size = fitted.groupby("model")["non_embedding_params"].first().idxmax()
    rows = fitted[fitted["model"] == size]
    return pd.Series({"model": size, "value": rows["value"].mean(), "se": rows["se"].max()})


def held_out_check(
    final_checkpoint: pd.DataFrame,
    metrics: pd.DataFrame,
    standard_errors: pd.DataFrame,
    protocols: tuple[str, ...],
    metric: str = "nDCG@10",
) -> pd.DataFrame:
    """One row per (objective, attention, split, protocol): forecast, miss, gap and the verdicts.

    ``final_checkpoint``: Table 8 rows; ``metrics``: the long metric table (for the sizes' final
    values and parameter counts); ``standard_errors``: :func:`final_standard_errors` of ``metric``.
    Columns ``miss_within_gap``, ``covered`` and ``se_below_third_of_gap`` are the three checks.
    """
    if final_checkpoint.empty:
        return pd.DataFrame()
    table = final_checkpoint[
        (final_checkpoint["metric"] == metric) & final_checkpoint["protocol"].isin(protocols)
    ]
    finals = final_rows(metrics[(metrics["metric"] == metric) & (metrics["role"] != "baseline")])
    finals = finals.merge(
        standard_errors[["objective", "model", "seed", "split", "se"]],
        on=["objective", "model", "seed", "split"],
        how="left",
    )
    out = []
    for r in table.itertuples():
        group = finals[
            (finals["objective"] == r.objective)
            & (finals["attention"] == r.attention)
            & (finals["split"] == r.split)
        ]
        held = group[group["model"] == r.model]
        below = _largest_fitted(group, r.model)
        if held.empty or below is None:
            continue
        gap = float(r.observed - below["value"])
        miss = float(abs(r.forecast - r.observed))
        se = float(max(held["se"].max(), below["se"]))
        out.append(
            {
                "objective": r.objective,
                "attention": r.attention,
                "split": r.split,
                "protocol": r.protocol,
                "law": r.law,
                "held_out": r.model,
                "observed": r.observed,
                "forecast": r.forecast,
                "low": r.low,
                "high": r.high,
                "covered": bool(r.covered),
                "miss": miss,
                "largest_fitted": below["model"],
                "largest_fitted_final": below["value"],
                "gap": gap,
                "miss_within_gap": bool(miss < gap),
                "se": se,
                "se_below_third_of_gap": bool(np.isfinite(se) and se < abs(gap) / 3),
                "queries_for_third_of_gap": _queries_needed(se, group["queries"].max(), gap),
                "forecast_status": r.forecast_status,
                "status": r.status,
            }
        )
    return pd.DataFrame(out)


def _queries_needed(se: float, queries: float, gap: float) -> float:
    """Queries at which the SE would be a third of the gap (SE scales as 1 / sqrt(queries))."""
    if not np.isfinite(se) or gap == 0 or not np.isfinite(queries):
        return np.nan
    return float(np.ceil(queries * (3 * se / abs(gap)) ** 2))


def planning_protocol(laws_dir: Path) -> str | None:
    """The joint protocol planning uses (``fitting.joint_protocol``; column ``planning`` of the fits)."""
    fits = pd.read_parquet(laws_dir / "fits.parquet", columns=["protocol", "planning"])
    chosen = fits.loc[fits["planning"].astype(bool), "protocol"].unique()
    return str(chosen[0]) if len(chosen) else None


def run_check(
    laws_dir: Path, metrics: pd.DataFrame, standard_errors: pd.DataFrame, metric: str = "nDCG@10"
) -> tuple[pd.DataFrame, str | None]:
    """(:func:`held_out_check` of the fit stage's Table 8 for the model law and the joint law
    planning uses, that joint protocol); empty when the grid has no held-out size."""
    try:
        final_checkpoint = pd.read_csv(laws_dir / "tables" / "table08_final_checkpoint.csv")
    except (FileNotFoundError, pd.errors.EmptyDataError):  # no held-out size: Table 8 is empty
        return pd.DataFrame(), None
    joint = planning_protocol(laws_dir)
    protocols = ("model", joint) if joint else ("model",)
    return held_out_check(final_checkpoint, metrics, standard_errors, protocols, metric), joint
