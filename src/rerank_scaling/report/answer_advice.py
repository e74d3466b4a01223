"""The answer's "What to run next" in words: the one owner of the advisor's wording
(:mod:`rerank_scaling.forecast.advise`), for the answer page and ``rerank-scaling advise``.

Input: an advice table (``advice.csv``: ``candidate, cost, expected_width,
expected_width_reduction, reduction_per_cost, width_now, form_spread_now, expected_form_spread``,
best first).
"""

from __future__ import annotations

import pandas as pd

NO_ADVICE = (
    "No advice: the grid has no held-out size, or too few fitted sizes for a law to forecast it "
    "(planning/advice.csv is empty)."
)
#: The advice table's columns on the page, with their headings.
SHOWN = {
    "candidate": "candidate run",
    "cost": "cost",
    "expected_width": "expected 95% width after it",
    "expected_width_reduction": "expected reduction",
    "reduction_per_cost": "reduction per unit cost",
    "expected_form_spread": "spread across law forms after it",
}


def next_sentence(advice: pd.DataFrame, unit: str = "") -> str:
    """ "Next: train X (cost C); the target's interval is expected to shrink from W to W'." (or why
    no candidate is expected to shrink it)."""
    if advice.empty:
        return NO_ADVICE
    best = advice.iloc[0]
    cost = f"{best['cost']:.3g}{' ' + unit if unit else ''}"
    if not best["expected_width_reduction"] > 0:
        return (
            "Next: no candidate is expected to shrink the target's interval "
            f"(width {best['width_now']:.3g}); more runs of these sizes are not expected to tell more."
        )
    return (
        f"Next: train {best['candidate']} (cost {cost}); the target's interval is expected to shrink "
        f"from {best['width_now']:.3g} to {best['expected_width']:.3g}."
    )


def plan_sentence(plans: pd.DataFrame, budget: float, unit: str = "") -> str:
    """With a budget: the best affordable set of runs (:mod:`rerank_scaling.forecast.advise_plan`),
    its cost and the target's expected interval after it."""
    money = f"{budget:.3g}{' ' + unit if unit else ''}"
    if plans.empty:
        return f"Budget {money}: no candidate run is affordable."
    best = plans.iloc[0]
    change = "shrink" if best["expected_width"] < best["width_now"] else "widen"
    return (
        f"Budget {money}: train {best['plan']} (cost {best['cost']:.3g}); the target's interval is "
        f"expected to {change} from {best['width_now']:.3g} to {best['expected_width']:.3g}, the law forms' "
        f"spread from {best['form_spread_now']:.3g} to {best['expected_form_spread']:.3g}."
    )


def form_sentence(advice: pd.DataFrame) -> str:
    """What the best run does to the spread of the target's point forecast across law forms."""
    best = advice.iloc[0]
    return (
        f"The law forms' point forecasts of the target now spread over {best['form_spread_now']:.3g}; "
        f"after {best['candidate']}, {best['expected_form_spread']:.3g} expected."
    )


def advice_table(advice: pd.DataFrame, rows: int = 6) -> pd.DataFrame:
    """The best ``rows`` candidates with readable headings and numbers."""
    shown = advice.head(rows)[list(SHOWN)].rename(columns=SHOWN)
    return shown.apply(lambda column: column.map(lambda v: f"{v:.3g}" if isinstance(v, float) else v))


def advice_lines(advice: pd.DataFrame | None, about: str = "", unit: str = "") -> list[str]:
    """answer.md's section: the sentence, the form spread, the table; ``about`` says which forecast."""
    lines = ["## What to run next (to be surer of the forecast)", ""]
    if advice is None or advice.empty:
        return [*lines, NO_ADVICE, ""]
    lines += [next_sentence(advice, unit), "", *([about, ""] if about else []), form_sentence(advice), ""]
    return [*lines, advice_table(advice).to_markdown(index=False, disable_numparse=True), ""]
