"""What the answer reads from a run: the question, the forecast rows it shows, the planning verdicts.

* forecasts: paper Table 8 (``laws/tables/table08_final_checkpoint.csv``: each held-out size at its
  final checkpoint, with ``forecast_status`` and ``reason``) for the headline metric and split, for
  the joint law planning uses (``fitting.joint_protocol``) and the model law, in that order;
* decisions: ``planning/decisions.csv`` where the plan stage writes it; otherwise the plan's budget
  rows (``planning/plan.parquet``, kind ``budget``: the point optimum of the central fit, with no
  probability), each turned into a verdict with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rerank_scaling.registries.size_axes import size_column
from rerank_scaling.report.answer import Question
from rerank_scaling.report.held_out_check import planning_protocol, run_check

POINT_OPTIMUM = "point optimum of the central fit; no probability (planning/decisions.csv not written)"


@dataclass(frozen=True)
class AnswerInputs:
    question: Question
    forecasts: pd.DataFrame  # Table 8 rows shown, planning's law first
    decisions: pd.DataFrame | None
    advice: pd.DataFrame | None = None  # planning/advice.csv, best first
    held_out: pd.DataFrame | None = None  # held_out_check rows: each held-out size vs the largest fitted


def question(metrics: pd.DataFrame, metric: str, split: str, size_axis: str) -> Question:
    """Fitted and held-out sizes of the trained runs, on the fit's size axis, smallest first."""
    runs = metrics[(metrics["family"] != "bm25") & (metrics["role"] != "baseline")]
    sizes = runs.groupby(["model", "role"], as_index=False)[size_column(size_axis)].first()
    sizes = sizes.sort_values(size_column(size_axis))

    def pairs(role: str) -> tuple[tuple[str, float], ...]:
        part = sizes[sizes["role"] == role]
        return tuple(zip(part["model"], part[size_column(size_axis)].astype(float), strict=True))

    return Question(metric, split, size_axis, pairs("fit"), pairs("held_out"))


def shown_forecasts(laws_dir: Path, metric: str, split: str) -> pd.DataFrame:
    """Table 8's rows for ``metric``/``split``: planning's joint protocol, then the model law."""
    try:
        table = pd.read_csv(laws_dir / "tables" / "table08_final_checkpoint.csv")
    except (FileNotFoundError, pd.errors.EmptyDataError):  # no held-out size: Table 8 is empty
        return pd.DataFrame()
    if "forecast_status" not in table.columns:
        raise ValueError(
            f"{laws_dir / 'tables' / 'table08_final_checkpoint.csv'} has no forecast_status column: "
            "it was written by an older fit stage; re-run it (snakemake --forcerun fit_laws)"
        )
    joint = planning_protocol(laws_dir)
    order = [p for p in (joint, "model") if p]
    rows = table[(table["metric"] == metric) & (table["split"] == split) & table["protocol"].isin(order)]
    rank = rows["protocol"].map({p: i for i, p in enumerate(order)})
    rows = rows.assign(_rank=rank).sort_values(["objective", "attention", "_rank"]).drop(columns="_rank")
    return rows.reset_index(drop=True)


def with_sizes(forecasts: pd.DataFrame, metrics: pd.DataFrame, size_axis: str) -> pd.DataFrame:
    """The forecast rows with each model's N (column ``size``) on the fit's size axis."""
    if forecasts.empty:
        return forecasts
    sizes = metrics[metrics["family"] != "bm25"].groupby("model")[size_column(size_axis)].first()
    return forecasts.assign(size=forecasts["model"].map(sizes))


def plan_verdicts(plan: pd.DataFrame) -> pd.DataFrame:
    """Verdicts from the plan's budget rows when there is no decisions.csv: ``train <model>`` for an
    optimum of an identified fit, else ``cannot decide`` with the fit's status and reason."""
    rows = plan[plan["kind"] == "budget"]
    decided = (rows["status"] == "ok") & rows["model"].notna()
    verdict = [
        "train " + str(m) if ok else f"cannot decide ({s})"
        for ok, m, s in zip(decided, rows["model"], rows["status"], strict=True)
    ]
    reason = [POINT_OPTIMUM if ok else r for ok, r in zip(decided, rows["reason"], strict=True)]
    return pd.DataFrame(
        {
            "objective": rows["objective"].to_numpy(),
            "metric": rows["metric"].to_numpy(),
            "split": rows["split"].to_numpy(),
            "budget": rows["budget"].to_numpy(),
            "verdict": verdict,
            "candidate": rows["model"].to_numpy(),
            "p_best": float("nan"),
            "expected_regret": float("nan"),
            "p_roi": float("nan"),
            "reason": reason,
        }
    )


def decisions(planning_dir: Path, metric: str, split: str) -> pd.DataFrame | None:
    """The planning verdicts for ``metric`` (and ``split`` where the table has it); None without a plan."""
    if (planning_dir / "decisions.csv").exists():
        table = pd.read_csv(planning_dir / "decisions.csv")
    elif (planning_dir / "plan.parquet").exists():
        table = plan_verdicts(pd.read_parquet(planning_dir / "plan.parquet"))
    else:
        return None
    table = table[table["metric"] == metric]
    if "split" in table.columns:
        table = table[table["split"].isna() | (table["split"] == split)]
    return table.reset_index(drop=True)


def load(
    metrics: pd.DataFrame,
    laws_dir: Path,
    planning_dir: Path,
    metric: str,
    split: str,
    size_axis: str,
    per_query: pd.DataFrame | None = None,
) -> AnswerInputs:
    """Everything the answer shows for one run (``per_query``: the per-query table that gives the
    held-out size's comparison with the largest fitted size its paired SE; None: no comparison)."""
    shown = with_sizes(shown_forecasts(laws_dir, metric, split), metrics, size_axis)
    advice = planning_dir / "advice.csv"
    return AnswerInputs(
        question(metrics, metric, split, size_axis),
        shown,
        decisions(planning_dir, metric, split),
        pd.read_csv(advice) if advice.exists() and advice.stat().st_size else None,
        run_check(laws_dir, metrics, per_query, metric)[0] if per_query is not None else None,
    )
