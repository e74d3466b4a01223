"""One verdict line per objective: the budget question's per-budget decisions folded into one line.

A plan asks "which size to train" at every configured budget (:func:`.decision_rows.budget_decision`);
the reader asks it once per objective. The line's verdict is the per-budget verdict where every
budget agrees, else each distinct verdict with the budgets it holds at ("train L4 at budgets 1, 10;
prefer L6 at budget 100"). Its numbers are the weakest over the budgets: the lowest P(best), the
largest expected regret and P(ROI >= lambda) of the largest budget; ``extrapolated`` when any
budget's choice lies beyond the validated range. ``cannot decide`` only where every budget is
undecided. The per-budget rows stay in plan.parquet / plan.csv (kind ``decision``) and plan.md.
"""

from __future__ import annotations

import pandas as pd

from rerank_scaling.laws.fit_settings import GROUP_KEYS

CANNOT = "cannot decide"


def _budgets(values: pd.Series) -> str:
    shown = [f"{float(b):.4g}" for b in values]
    return ("budget " if len(shown) == 1 else "budgets ") + ", ".join(shown)


def _fold(rows: pd.DataFrame) -> dict[str, object]:
    """One line from one group's budget decisions (sorted by budget)."""
    rows = rows.sort_values("budget")
    decided = rows[rows["verdict"] != CANNOT]
    first = rows.iloc[0]
    line = {key: first[key] for key in rows.columns if key in (*GROUP_KEYS, "law", "question")}
    line["budget"] = float("nan")
    line["budgets"] = _budgets(rows["budget"])
    if decided.empty:
        return line | {"verdict": CANNOT, "candidate": "", "reason": f"{line['budgets']}: {first['reason']}"}
    verdicts = list(dict.fromkeys(rows["verdict"]))
    if len(verdicts) == 1:
        verdict = verdicts[0]
    else:
        verdict = "; ".join(f"{v} at {_budgets(rows.loc[rows['verdict'] == v, 'budget'])}" for v in verdicts)
    largest = decided.iloc[-1]
    reason = "; ".join(f"{float(r.budget):.4g}: {r.reason}" for r in rows.itertuples())
    return line | {
        "verdict": verdict,
        "candidate": largest["candidate"],
        "p_best": decided["p_best"].min(),
        "expected_regret": decided["expected_regret"].max(),
        "p_roi": largest["p_roi"],
        "extrapolated": bool(decided["extrapolated"].fillna(False).astype(bool).any()),
        "validated_ratio": largest.get("validated_ratio"),
        "reason": reason,
    }


def objective_verdicts(decisions: pd.DataFrame) -> pd.DataFrame:
    """One line per group (objective x attention x ...) and law of the budget question, the other
    questions' rows (already one per group and law) unchanged; columns of ``decisions``."""
    budget = decisions[decisions["question"] == "budget"]
    keys = [key for key in (*GROUP_KEYS, "law") if key in budget.columns]
    folded = [_fold(rows) for _, rows in budget.groupby(keys, dropna=False, sort=False)]
    others = decisions[decisions["question"] != "budget"]
    lines = pd.DataFrame(folded, columns=[*decisions.columns, "budgets"])
    return pd.concat([lines, others.assign(budgets=pd.NA)], ignore_index=True)
