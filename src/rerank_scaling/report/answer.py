"""The answer of a run in words: the one owner of its wording.

A team lead asks four things, in this order: which sizes were fitted and which forecast (and on
which size axis); per objective, the forecast with its 95% interval, whether it is usable (the
forecast's own status, :mod:`rerank_scaling.laws.forecast_status`) and, where the size was
trained, whether the observation fell inside; and what to train next (the planning verdict). The
report's landing page, ``answer.md``/``answer.html`` (:mod:`.answer_page`) and the command line's
answer all take their sentences and table from here, so both entry points say the same thing the
same way.

Inputs are tables with named columns:

* forecasts (paper Table 8 rows, or a user's table): ``objective``, ``model``, ``forecast``,
  ``low``, ``high``, ``forecast_status``, ``reason``; optional ``law``, ``protocol``, ``size``,
  ``observed``, ``covered`` (a target size that was not trained has no observation);
* decisions (``planning/decisions.csv``): ``objective``, ``metric``, ``budget``, ``verdict``,
  ``candidate``, ``p_best``, ``expected_regret``, ``p_roi``, ``reason``; optional ``question``,
  ``law``.

A caller without a plan (the command line on a user's table) prints :func:`forecast_lines`; with
one, :func:`answer_lines`. Both take a :class:`Question` (or None when the sizes are unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rerank_scaling.registries import size_axes

#: What each forecast status means for the reader (the statuses of laws.forecast_status.STATUSES).
STATUS_WORDS = {
    "usable": "usable",
    "too_wide": "too wide to act on",
    "beyond_validated_range": "beyond the validated range",
    "curvature_disagrees": "the ladder's top segment disagrees with the law",
    "break_sensitive": "a break past the fitted sizes would fall outside",
    "form_sensitive": "depends on the law's form",
}
#: The size axis of ``rerank-scaling forecast`` on a user's table (not a ``fitting.size_axis``).
TABLE_AXIS = "size"
NO_FORECAST = (
    "No forecast: the grid has no held-out or target size, or no law fitted to the other sizes forecast one."
)
NO_DECISION = "No planning verdict: the plan has no decision rows (see planning/plan.md)."
TABLE_COLUMNS = [
    "objective",
    "size",
    "law",
    "forecast [95% interval]",
    "status",
    "why",
    "observed",
    "inside?",
]


@dataclass(frozen=True)
class Question:
    """What was fitted and what forecast: (model, N) pairs on the fit's size axis."""

    metric: str
    split: str
    size_axis: str  # fitting.size_axis (registries.size_axes), or TABLE_AXIS
    fitted: tuple[tuple[str, float], ...]
    forecast: tuple[tuple[str, float], ...]


def _sizes(pairs: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{model} ({size / 1e6:.3g}M)" for model, size in pairs) or "none"


def axis_label(axis: str) -> str:
    """How the answer names size axis ``axis``."""
    return "the table's size column" if axis == TABLE_AXIS else size_axes.size_axis(axis).label


def question_sentence(question: Question) -> str:
    """The question in one sentence, with the size axis named."""
    return (
        f"Fitted on {_sizes(question.fitted)}; forecast: {_sizes(question.forecast)} "
        f"(N = {axis_label(question.size_axis)}); metric {question.metric} on the {question.split} split."
    )


def short_reason(status: str, reason: str) -> str:
    """The part of a forecast's reason that says why it has its status (the numbers), without the
    restated interval and the fit's parameter diagnostics; the whole reason when it has another form."""
    marker = f"{status}; "
    if marker not in reason:
        return reason
    return reason.split(marker, 1)[1].split("; parameters:", 1)[0]


def _law(row: pd.Series) -> str:
    law, protocol = row.get("law"), row.get("protocol")
    if pd.isna(law):
        return ""
    return f"{law} ({protocol})" if isinstance(protocol, str) and protocol != law else str(law)


def _inside(row: pd.Series) -> str:
    if pd.isna(row.get("observed")):
        return "not trained"
    covered = row.get("covered")
    if pd.isna(covered):
        covered = row["low"] <= row["observed"] <= row["high"]
    return "inside" if bool(covered) else "outside"


def _display(r: pd.Series) -> dict[str, str]:
    """One forecast row as the text the table and the sentences show (keys ``TABLE_COLUMNS``)."""
    size = r["model"] if pd.isna(r.get("size")) else f"{r['model']} ({r['size'] / 1e6:.3g}M)"
    observed = r.get("observed")
    return {
        "objective": r["objective"],
        "size": size,
        "law": _law(r),
        "forecast [95% interval]": f"{r['forecast']:.4f} [{r['low']:.4f}, {r['high']:.4f}]",
        "status": STATUS_WORDS.get(r["forecast_status"], r["forecast_status"]),
        "why": short_reason(r["forecast_status"], str(r["reason"])),
        "observed": "" if pd.isna(observed) else f"{observed:.4f}",
        "inside?": _inside(r),
    }


def forecast_table(forecasts: pd.DataFrame) -> pd.DataFrame:
    """One display row per forecast (columns ``TABLE_COLUMNS``), numbers as text."""
    return pd.DataFrame([_display(r) for _, r in forecasts.iterrows()], columns=TABLE_COLUMNS)


def forecast_sentences(forecasts: pd.DataFrame) -> list[str]:
    """One sentence per forecast: interval, status with its reason, and the observation if any."""
    if forecasts.empty:
        return [NO_FORECAST]
    lines = []
    for _, r in forecasts.iterrows():
        shown = _display(r)
        law = f" by {shown['law']}" if shown["law"] else ""
        inside = shown["inside?"]
        seen = (
            "not trained, nothing to compare"
            if inside == "not trained"
            else f"observed {shown['observed']}, {inside} the interval"
        )
        lines.append(
            f"{r['objective']}, {shown['size']}{law}: {shown['forecast [95% interval]']}; "
            f"{shown['status']} ({shown['why']}); {seen}."
        )
    return lines


def _number(value: object, spec: str) -> str:
    return "" if pd.isna(value) else format(float(value), spec)


def decision_table(decisions: pd.DataFrame) -> pd.DataFrame:
    """One display row per verdict (the same numbers as :func:`decision_sentences`), as text."""
    rows = [
        {
            "objective": d["objective"],
            "budget": d["budgets"] if isinstance(d.get("budgets"), str) else _number(d.get("budget"), ".4g"),
            "question": d.get("question", "") if isinstance(d.get("question"), str) else "",
            "verdict": d["verdict"],
            "P(best)": _number(d.get("p_best"), ".2f"),
            "expected regret": _number(d.get("expected_regret"), ".4g"),
            "P(ROI >= lambda)": _number(d.get("p_roi"), ".2f"),
            "reason": "" if pd.isna(d.get("reason")) else str(d["reason"]),
        }
        for _, d in decisions.iterrows()
    ]
    return pd.DataFrame(rows).replace("", pd.NA).dropna(axis=1, how="all").fillna("")


def decision_sentences(decisions: pd.DataFrame | None) -> list[str]:
    """One sentence per (objective, metric, budget): the verdict with its numbers and reason."""
    if decisions is None or decisions.empty:
        return [NO_DECISION]
    lines = []
    for _, d in decisions.iterrows():
        budget = "" if pd.isna(d.get("budget")) else f" at budget {float(d['budget']):.4g}"
        if isinstance(d.get("budgets"), str):  # planning's line per objective: the budgets folded
            budget = f" at {d['budgets']}"
        question = f" ({d['question']})" if isinstance(d.get("question"), str) else ""
        numbers = [
            f"{name} {format(float(d[column]), spec)}"
            for name, column, spec in (
                ("P(best)", "p_best", ".2f"),
                ("expected regret", "expected_regret", ".4g"),
                ("P(ROI >= lambda)", "p_roi", ".2f"),
            )
            if column in d and not pd.isna(d[column])
        ]
        numbers = f" ({', '.join(numbers)})" if numbers else ""
        reason = "" if pd.isna(d.get("reason")) or not str(d["reason"]) else f": {d['reason']}"
        lines.append(f"{d['objective']}, {d['metric']}{budget}{question}: {d['verdict']}{numbers}{reason}.")
    return lines


def forecast_lines(question: Question | None, forecasts: pd.DataFrame) -> list[str]:
    """The question and the forecasts as Markdown lines (sentences, then the table)."""
    lines = ["## The question", "", question_sentence(question) if question else "(no sizes)", ""]
    lines += ["## The forecasts", ""]
    lines += [f"- {line}" for line in forecast_sentences(forecasts)]
    if not forecasts.empty:
        lines += ["", forecast_table(forecasts).to_markdown(index=False, disable_numparse=True)]
    return [*lines, ""]


def answer_lines(
    question: Question | None, forecasts: pd.DataFrame, decisions: pd.DataFrame | None
) -> list[str]:
    """The answer as Markdown lines: question, forecasts (sentences, then the table), verdicts."""
    lines = forecast_lines(question, forecasts)
    lines += ["## What to train next (planning verdict)", ""]
    lines += [f"- {line}" for line in decision_sentences(decisions)]
    return [*lines, ""]
