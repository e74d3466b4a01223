"""Is the held-out size's final checkpoint forecast within the size gap, and is the metric precise
enough to tell?

For every (objective, attention, split) with a held-out size, the forecast of its final checkpoint
(paper Table 8, :func:`rerank_scaling.laws.law_tables.final_checkpoint`) is compared with the yardstick
a planner cares about: the observed gap between the two largest sizes' final values (the held-out
size and the largest fitted one). A forecast is useful when it misses by less than that gap, and
its 95% interval covers the observation. The gap is signed: when the held-out size ends at or below
the largest fitted one, no miss is within it (the law, fitted to sizes that improve, cannot tell that
step apart), so ``miss_within_gap`` is False whatever the miss. The gap itself is only visible when
it exceeds its noise: ``gap_se`` is the paired standard error of the gap (the two sizes' runs compared
query by query on the same queries, :mod:`rerank_scaling.report.paired`; each size's seeds averaged),
``gap_verdict`` says whether the gap exceeds 1.96 of it (``worse``: below minus that), and
``se_below_third_of_gap`` whether it is below a third of the gap (the precision at which the gap can be read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.report.scaling_evidence import QueryTable, final_rows, verdict

# What summary.md and the docs' default-run block say when there is nothing to check.
NO_CHECK = (
    "(no forecast of a held-out size: the grid has no held-out size, or no law fitted to the other "
    "sizes forecast it; see laws/tables/table08_final_checkpoint.csv and laws/fits.parquet)"
)


def _largest_fitted(finals: pd.DataFrame, held_out: str) -> pd.DataFrame:
    """The final rows (one per seed) of the largest size below ``held_out``; empty when none."""
    fitted = finals[finals["model"] != held_out]
    if fitted.empty:
        return fitted
    size = fitted.groupby("model")["non_embedding_params"].first().idxmax()
    return fitted[fitted["model"] == size]


def _seed_mean_terms(rows: pd.DataFrame, sign: float) -> dict[tuple[str, int], float]:
    """Paired-SE terms of the mean over ``rows``' runs (seeds), times ``sign``."""
    return {(r["run"], int(r["checkpoint"])): sign / len(rows) for _, r in rows.iterrows()}


def held_out_check(
    final_checkpoint: pd.DataFrame,
    metrics: pd.DataFrame,
    per_query: pd.DataFrame | None,
    protocols: tuple[str, ...],
    metric: str = "nDCG@10",
) -> pd.DataFrame:
    """One row per (objective, attention, split, protocol): forecast, miss, gap and the verdicts.

    ``final_checkpoint``: Table 8 rows; ``metrics``: the long metric table (for the sizes' final
    values and parameter counts); ``per_query``: the per-query table (``records.PER_QUERY_COLUMNS``;
    None: no gap SE). Columns ``miss_within_gap``, ``covered``, ``gap_verdict`` and
    ``se_below_third_of_gap`` are the checks.
    """
    if final_checkpoint.empty:
        return pd.DataFrame()
    table = final_checkpoint[
        (final_checkpoint["metric"] == metric) & final_checkpoint["protocol"].isin(protocols)
    ]
    finals = final_rows(metrics[(metrics["metric"] == metric) & (metrics["role"] != "baseline")])
    tables = {
        split: QueryTable.build(per_query, metric, split) if per_query is not None else None
        for split in table["split"].unique()
    }
    out = []
    for r in table.itertuples():
        group = finals[
            (finals["objective"] == r.objective)
            & (finals["attention"] == r.attention)
            & (finals["split"] == r.split)
        ]
        held = group[group["model"] == r.model]
        below = _largest_fitted(group, r.model)
        if held.empty or below.empty:
            continue
        gap = float(r.observed - below["value"].mean())
        miss = float(abs(r.forecast - r.observed))
        queries = tables[r.split]
        terms = _seed_mean_terms(held, 1.0) | _seed_mean_terms(below, -1.0)
        se = queries.standard_error(terms) if queries is not None else np.nan
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
                "largest_fitted": below["model"].iloc[0],
                "largest_fitted_final": below["value"].mean(),
                "gap": gap,
                "miss_within_gap": bool(miss < gap),
                "gap_se": se,
                "gap_verdict": verdict(gap, se),
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
    laws_dir: Path, metrics: pd.DataFrame, per_query: pd.DataFrame | None, metric: str = "nDCG@10"
) -> tuple[pd.DataFrame, str | None]:
    """(:func:`held_out_check` of the fit stage's Table 8 for the model law and the joint law
    planning uses, that joint protocol); empty when the grid has no held-out size."""
    try:
        final_checkpoint = pd.read_csv(laws_dir / "tables" / "table08_final_checkpoint.csv")
    except (FileNotFoundError, pd.errors.EmptyDataError):  # no held-out size: Table 8 is empty
        return pd.DataFrame(), None
    joint = planning_protocol(laws_dir)
    protocols = ("model", joint) if joint else ("model",)
    return held_out_check(final_checkpoint, metrics, per_query, protocols, metric), joint
