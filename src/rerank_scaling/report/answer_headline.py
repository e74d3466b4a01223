"""The answer in one sentence per objective: what the landing page, answer.md and summary.md say first.

Per objective (and attention, where a run has several): the held-out size's forecast with its 95%
interval by the law planning uses (the first forecast row of the objective, :mod:`.answer_inputs`
orders planning's joint law first), its status, the observed value and whether it fell inside,
the held-out size against the largest fitted one (its difference with the paired standard error
over the same queries and the verdict of :mod:`.scaling_evidence`, from :mod:`.held_out_check`:
"below, beyond its noise" says plainly that the larger model scored worse), and what to train (the
objective's planning line, ``planning/decisions.csv``: the budget question, else the first line).
The numbers and words are :mod:`.answer`'s; the tables follow the sentences.
"""

from __future__ import annotations

import html

import pandas as pd

from rerank_scaling.report.answer import NO_FORECAST, forecast_table
from rerank_scaling.report.scaling_evidence import VERDICT_WORDS

NO_PLAN = "no planning verdict (planning/decisions.csv not written)"


def _label(row: pd.Series, several_attentions: bool) -> str:
    attention = row.get("attention")
    return (
        f"{row['objective']} ({attention})"
        if several_attentions and isinstance(attention, str)
        else row["objective"]
    )


def _matches(table: pd.DataFrame, row: pd.Series) -> pd.Series:
    mask = table["objective"] == row["objective"]
    if "attention" in table.columns and isinstance(row.get("attention"), str):
        mask &= table["attention"].isna() | (table["attention"] == row["attention"])
    return mask


def what_to_train(decisions: pd.DataFrame | None, row: pd.Series) -> str:
    """The objective's planning verdict with its P(best) and the extrapolation flag, as words."""
    if decisions is None or decisions.empty:
        return NO_PLAN
    lines = decisions[_matches(decisions, row)]
    if "question" in lines.columns:
        lines = lines.sort_values("question", key=lambda q: q.ne("budget"), kind="stable")
    if lines.empty:
        return NO_PLAN
    line = lines.iloc[0]
    words = str(line["verdict"])
    if not pd.isna(line.get("p_best")):
        words += f" (P(best) {float(line['p_best']):.2f})"
    if bool(line.get("extrapolated")) and not pd.isna(line.get("extrapolated")):
        words += ", extrapolated beyond the validated range"
    return words


def against_largest_fitted(held_out: pd.DataFrame | None, row: pd.Series) -> str:
    """The held-out size's final value against the largest fitted size's (seeds averaged), with
    the paired SE and its verdict, as words; empty without a check row (no per-query table, or
    the held-out size not trained)."""
    if held_out is None or held_out.empty:
        return ""
    match = held_out[
        _matches(held_out, row)
        & (held_out["split"] == row["split"])
        & (held_out["protocol"] == row["protocol"])
        & (held_out["held_out"] == row["model"])
    ]
    if match.empty:
        return ""
    check = match.iloc[0]
    gap = float(check["gap"])
    side = "below" if gap < 0 else "above"
    se = "no paired SE" if pd.isna(check["gap_se"]) else f"paired SE {float(check['gap_se']):.4f}"
    return (
        f" It scored {side} the largest fitted size, {check['largest_fitted']} "
        f"({float(check['largest_fitted_final']):.4f}), by {abs(gap):.4f} ({se}): "
        f"{VERDICT_WORDS[str(check['gap_verdict'])]}."
    )


def headline_sentences(
    forecasts: pd.DataFrame, decisions: pd.DataFrame | None, held_out: pd.DataFrame | None = None
) -> list[tuple[str, str]]:
    """One (objective, sentence) per objective (see the module docstring); none without forecasts.
    ``held_out``: :func:`.held_out_check.held_out_check`'s rows (None: no comparison said)."""
    if forecasts.empty:
        return []
    shown = forecast_table(forecasts)
    keys = [k for k in ("objective", "attention") if k in forecasts.columns]
    several = "attention" in forecasts.columns and forecasts["attention"].nunique() > 1
    first = forecasts.reset_index(drop=True).drop_duplicates(keys)
    lines = []
    for index, row in first.iterrows():
        text = shown.loc[index]
        law = f" by {text['law']}" if text["law"] else ""
        seen = (
            "not trained, so nothing to compare"
            if text["inside?"] == "not trained"
            else f"observed {text['observed']}, {text['inside?']} the interval"
        )
        lines.append(
            (
                _label(row, several),
                f"{text['size']} is forecast at {text['forecast [95% interval]']}{law}, {text['status']}; "
                f"{seen}.{against_largest_fitted(held_out, row)} "
                f"What to train: {what_to_train(decisions, row)}.",
            )
        )
    return lines


def headline_lines(
    forecasts: pd.DataFrame, decisions: pd.DataFrame | None, held_out: pd.DataFrame | None = None
) -> list[str]:
    """The sentences as a Markdown section (``## The answer``)."""
    sentences = headline_sentences(forecasts, decisions, held_out)
    shown = [f"- **{label}**: {text}" for label, text in sentences] or [NO_FORECAST]
    return ["## The answer", "", *shown, ""]


def headline_html(
    forecasts: pd.DataFrame, decisions: pd.DataFrame | None, held_out: pd.DataFrame | None = None
) -> str:
    """The sentences as an HTML list (id ``answer-headline``) under ``<h2>The answer</h2>``."""
    sentences = headline_sentences(forecasts, decisions, held_out)
    items = "".join(
        f"<li><strong>{html.escape(label)}</strong>: {html.escape(text)}</li>" for label, text in sentences
    )
    body = (
        f'<ul id="answer-headline">{items}</ul>'
        if items
        else f'<p id="answer-headline">{html.escape(NO_FORECAST)}</p>'
    )
    return f"<h2>The answer</h2>\n{body}"
