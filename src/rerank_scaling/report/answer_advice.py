"""The answer's "What to run next" in words: the one owner of the advisor's wording
(:mod:`rerank_scaling.forecast.advise`), for the answer page and ``rerank-scaling advise``.

Input: an advice table (``advice.csv``: ``candidate, cost, expected_width,
expected_width_reduction, reduction_per_cost, reduction_margin, tied_with_best, outcomes, width_now,
form_spread_now, expected_form_spread``, best first). A reduction is a Monte Carlo estimate: the
sentence names the best candidate only with its noise, says when no reduction is beyond it, and
names the candidates the simulation cannot tell from the best.
"""

from __future__ import annotations

import numpy as np
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
    "reduction_margin": "its 95% Monte Carlo margin",
    "reduction_per_cost": "reduction per unit cost",
    "tied_with_best": "not told from the best",
    "expected_form_spread": "spread across law forms after it",
}


def noise(row: pd.Series) -> str:
    """The reduction with its 95% Monte Carlo margin and the number of simulated outcomes."""
    margin = float(row.get("reduction_margin", np.nan))
    outcomes = row.get("outcomes")
    count = f"{int(outcomes)} simulated outcomes" if pd.notna(outcomes) else "the simulated outcomes"
    if not np.isfinite(margin):
        return f"reduction {row['expected_width_reduction']:.3g}, its noise unknown from {count}"
    return f"reduction {row['expected_width_reduction']:.3g} ± {margin:.2g} over {count}"


def ranked_and_sure(advice: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``advice`` ranked by reduction per unit cost (a budget reorders advice.csv's rows), and its
    rows whose reduction exceeds its 95% Monte Carlo margin (one outcome: the estimate alone)."""
    ranked = advice.sort_values("reduction_per_cost", ascending=False, kind="stable", na_position="last")
    margins = ranked.get("reduction_margin", pd.Series(np.nan, index=ranked.index)).fillna(0.0)
    return ranked, ranked[ranked["expected_width_reduction"] > margins]


def named_run(advice: pd.DataFrame) -> pd.Series:
    """The run the sentence names (:func:`next_sentence`): the best-ranked one beyond its noise,
    else the best-ranked one."""
    ranked, sure = ranked_and_sure(advice)
    return (sure if len(sure) else ranked).iloc[0]


def next_sentence(advice: pd.DataFrame, unit: str = "") -> str:
    """ "Next: train X (cost C); the target's interval is expected to shrink from W to W'." for X the
    best-ranked candidate (reduction per unit cost) whose reduction exceeds its 95% Monte Carlo
    margin, with that margin; then the candidates the simulation cannot tell from the best, or those
    ranked ahead of X within their noise. Without such a candidate: "unknown", or, where even the
    best widens the interval beyond its margin, that no candidate is expected to shrink it."""
    if advice.empty:
        return NO_ADVICE
    ranked, sure = ranked_and_sure(advice)
    best = ranked.iloc[0]
    margin = float(np.nan_to_num(best.get("reduction_margin", np.nan)))  # one outcome: none
    now = f"width {best['width_now']:.3g}; the best, {best['candidate']}: {noise(best)}"
    if sure.empty and not best["expected_width_reduction"] >= -margin:
        return (
            f"Next: no candidate is expected to shrink the target's interval ({now}); more runs of "
            "these sizes are not expected to tell more."
        )
    if sure.empty:
        return (
            f"Next: unknown; the simulation cannot tell whether any candidate shrinks the target's "
            f"interval ({now}). More simulated outcomes (rerank-scaling advise --outcomes) narrow "
            "that margin."
        )
    chosen = sure.iloc[0]
    cost = f"{chosen['cost']:.3g}{' ' + unit if unit else ''}"
    sentence = (
        f"Next: train {chosen['candidate']} (cost {cost}); the target's interval is expected to shrink "
        f"from {chosen['width_now']:.3g} to {chosen['expected_width']:.3g} ({noise(chosen)})."
    )
    if chosen["candidate"] != best["candidate"]:
        ahead = ranked.loc[: chosen.name].iloc[:-1]
        return (
            f"{sentence} Ranked ahead of it per unit cost, but within the simulation's noise: "
            f"{', '.join(ahead['candidate'].astype(str))}."
        )
    tied = ranked[ranked.get("tied_with_best", False) & (ranked["candidate"] != best["candidate"])]
    if tied.empty:
        return sentence
    return (
        f"{sentence} The simulation cannot tell it from {', '.join(tied['candidate'].astype(str))}: "
        "their reductions per unit cost differ from its by less than the 95% Monte Carlo margin."
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
        f"expected to {change} from {best['width_now']:.3g} to {best['expected_width']:.3g} "
        f"({noise(best)}), the law forms' spread from {best['form_spread_now']:.3g} to "
        f"{best['expected_form_spread']:.3g}."
    )


def form_sentence(advice: pd.DataFrame) -> str:
    """What the named run (:func:`named_run`) does to the spread of the target's point forecast
    across law forms."""
    best = named_run(advice)
    return (
        f"The law forms' point forecasts of the target now spread over {best['form_spread_now']:.3g}; "
        f"after {best['candidate']}, {best['expected_form_spread']:.3g} expected."
    )


def advice_table(advice: pd.DataFrame, rows: int = 6) -> pd.DataFrame:
    """The best ``rows`` candidates with readable headings and numbers."""
    shown = advice.head(rows)[[c for c in SHOWN if c in advice.columns]]
    if "tied_with_best" in shown:
        shown = shown.assign(tied_with_best=shown["tied_with_best"].map({True: "yes", False: "no"}))
    shown = shown.rename(columns=SHOWN)
    return shown.apply(lambda column: column.map(lambda v: f"{v:.3g}" if isinstance(v, float) else v))


def advice_lines(advice: pd.DataFrame | None, about: str = "", unit: str = "") -> list[str]:
    """answer.md's section: the sentence, the form spread, the table; ``about`` says which forecast."""
    lines = ["## What to run next (to be surer of the forecast)", ""]
    if advice is None or advice.empty:
        return [*lines, NO_ADVICE, ""]
    lines += [next_sentence(advice, unit), "", *([about, ""] if about else []), form_sentence(advice), ""]
    return [*lines, advice_table(advice).to_markdown(index=False, disable_numparse=True), ""]
