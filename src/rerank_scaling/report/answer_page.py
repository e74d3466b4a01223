"""Stage: the answer first. ``answer.md``, a standalone ``answer.html`` (opens without a server, the
figure embedded as base64) and the same section for the Snakemake report's landing page.

    python -m rerank_scaling.report.answer_page --metrics all.parquet --laws DIR --planning DIR \
        --fitting '{"metrics": ["nDCG@10"], "size_axis": "non_embedding"}' --split dev --out-dir results/<run>

The headline metric is the first of ``fitting.metrics``, on the first fitted split; N is on
``fitting.size_axis``.

Writes into --out-dir: ``answer.md``, ``answer.html``, ``answer_section.html`` (the section alone,
which ``report/workflow.rst`` includes) and ``figures/answer.{png,pdf}``. The words come from
:mod:`.answer`, the rows from :mod:`.answer_inputs`, the figure from :mod:`.answer_figure`.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.plotting import save_figure
from rerank_scaling.registries.size_axes import size_column
from rerank_scaling.report import answer, answer_advice
from rerank_scaling.report.answer_figure import forecast_figure
from rerank_scaling.report.answer_headline import headline_html, headline_lines
from rerank_scaling.report.answer_inputs import AnswerInputs, load
from rerank_scaling.settings import parse_json_arg, settings_from_dict

FIGURE_CAPTION = (
    "Read: does each held-out size's cross fall inside its law's band, and where it lies against BM25 "
    "(dashed). Dots: fitted sizes' observed final values; crosses: held-out sizes; lines: each law's "
    "forecast at every trained size's final checkpoint; bands: its 95% prediction interval."
)
#: Where the standalone page links to, relative to results/<run>/ (label, path).
LINKS = (
    ("Full summary (scaling evidence, held-out check, every table)", "summary.md"),
    ("Planning: decisions, candidates, cost profiles", "planning/plan.md"),
    ("Figures (PNG and PDF)", "figures/"),
    ("Law tables (CSV, Markdown, LaTeX)", "laws/tables/"),
    ("Snakemake report (every figure and table, the DAG)", "../report.html"),
)
CSS = """
#answer { font-family: system-ui, sans-serif; max-width: 72rem; line-height: 1.4; }
#answer table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
#answer th, #answer td { border: 1px solid #999; padding: 0.2rem 0.4rem; }
#answer td { text-align: left; vertical-align: top; }
#answer th { background: #eee; text-align: left; }
#answer figure { margin: 1rem 0; }
#answer img { max-width: 100%; height: auto; }
#answer figcaption { font-size: 0.85rem; color: #333; }
"""


def _verdicts(decisions: pd.DataFrame | None) -> str:
    """The verdicts as a table (one row per objective and budget), or why there are none."""
    if decisions is None or decisions.empty:
        return f'<p id="answer-verdicts">{html.escape(answer.NO_DECISION)}</p>'
    return answer.decision_table(decisions).to_html(index=False, table_id="answer-verdicts", border=0)


def _advice(advice: pd.DataFrame | None) -> list[str]:
    """ "What to run next": the sentence on top, what it is about, the form spread, the table."""
    parts = ["<h2>What to run next (to be surer of the forecast)</h2>"]
    if advice is None or advice.empty:
        return [*parts, f'<p id="answer-advice">{html.escape(answer_advice.NO_ADVICE)}</p>']
    unit = str(advice["cost_unit"].iloc[0]) if "cost_unit" in advice else ""
    sentences = [answer_advice.next_sentence(advice, unit), advice_about(advice)]
    sentences.append(answer_advice.form_sentence(advice))
    parts.append(f'<p id="answer-advice"><strong>{html.escape(sentences[0])}</strong></p>')
    parts += [f"<p>{html.escape(s)}</p>" for s in sentences[1:] if s]
    table = answer_advice.advice_table(advice)
    return [*parts, table.to_html(index=False, table_id="answer-advice-table", border=0)]


def advice_about(advice: pd.DataFrame) -> str:
    """Which forecast the advice makes surer (advice.csv's ``metric, split, objective, target``)."""
    if advice.empty or "target" not in advice:
        return ""
    row = advice.iloc[0]
    return (
        f"For {row['metric']} on the {row['split']} split, {row['objective']}: the forecast of "
        f"{row['target']} ({row['target_size'] / 1e6:.3g}M); the candidates are the grid's sizes again "
        "(another seed) and the geometric midpoints between them and to the target, priced from the "
        "measured cost profiles (planning/advice.csv)."
    )


def section(inputs: AnswerInputs, figure_png: bytes, warnings: list[str] | None = None) -> str:
    """The answer as one HTML section: the data's warnings (thin training data), the answer in one
    sentence per objective, question, forecast table, verdicts, figure (embedded)."""
    table = answer.forecast_table(inputs.forecasts)
    parts = [
        '<section id="answer">',
        f"<style>{CSS}</style>",
        *(
            f'<p class="answer-warning"><strong>Warning</strong>: {html.escape(w)}</p>'
            for w in warnings or []
        ),
        headline_html(inputs.forecasts, inputs.decisions, inputs.held_out),
        "<h2>The question</h2>",
        f'<p id="answer-question">{html.escape(answer.question_sentence(inputs.question))}</p>',
        "<h2>The forecasts</h2>",
    ]
    if len(table):
        parts.append(table.to_html(index=False, table_id="answer-forecasts", border=0))
    else:
        parts.append(f'<p id="answer-forecasts">{html.escape(answer.NO_FORECAST)}</p>')
    parts += [
        *_advice(inputs.advice),
        "<h2>What to train next (planning verdict)</h2>",
        _verdicts(inputs.decisions),
        '<figure id="answer-figure">',
        f'<img alt="forecasts with 95% intervals against observations" '
        f'src="data:image/png;base64,{base64.b64encode(figure_png).decode()}">',
        f"<figcaption>{html.escape(FIGURE_CAPTION)}</figcaption>",
        "</figure>",
        "</section>",
    ]
    return "\n".join(parts)


def page(title: str, body: str) -> str:
    """A standalone HTML page around the answer's section, with links to the rest of the run."""
    links = "".join(
        f'<li><a href="{html.escape(path)}">{html.escape(label)}</a></li>' for label, path in LINKS
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"</head><body>\n<h1>{html.escape(title)}</h1>\n{body}\n<h2>Everything else</h2><ul>{links}</ul>\n"
        "</body></html>\n"
    )


def markdown(title: str, inputs: AnswerInputs, warnings: list[str] | None = None) -> str:
    """answer.md: the data's warnings, one sentence per objective, the same answer, the figure
    linked, then the links."""
    lines = [f"# {title}", "", *(f"**Warning**: {warning}\n" for warning in warnings or [])]
    lines += headline_lines(inputs.forecasts, inputs.decisions, inputs.held_out)
    lines += answer.answer_lines(inputs.question, inputs.forecasts, inputs.decisions)
    if inputs.advice is not None:  # before the planning verdict, as on the page
        unit = str(inputs.advice["cost_unit"].iloc[0]) if "cost_unit" in inputs.advice else ""
        verdict = lines.index("## What to train next (planning verdict)")
        advice = answer_advice.advice_lines(inputs.advice, advice_about(inputs.advice), unit)
        lines[verdict:verdict] = advice
    lines += ["![the answer's figure](figures/answer.png)", "", FIGURE_CAPTION, "", "## Everything else", ""]
    lines += [f"- [{label}]({path})" for label, path in LINKS]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--laws", required=True, help="the fit stage's directory (laws/)")
    parser.add_argument("--planning", required=True, help="the plan stage's directory (planning/)")
    parser.add_argument("--fitting", required=True, help="JSON of the config's fitting section")
    parser.add_argument("--split", required=True, help="the headline split (the first fitted split)")
    parser.add_argument("--out-dir", required=True, help="results/<run>")
    parser.add_argument("--title", default="rerank-scaling: the answer")
    parser.add_argument(
        "--example-counts", default=None, help="examples/counts.json: its warnings come first"
    )
    parser.add_argument(
        "--per-query", default=None, help="metrics/per_query.parquet: the paired SE of the held-out gap"
    )
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    fitting = settings_from_dict(FitSettings, parse_json_arg(args.fitting), "fitting")
    metric, size_axis = fitting.metrics[0], fitting.size_axis
    metrics = pd.read_parquet(args.metrics)
    per_query = pd.read_parquet(args.per_query) if args.per_query else None
    inputs = load(metrics, Path(args.laws), Path(args.planning), metric, args.split, size_axis, per_query)
    forecasts = pd.read_parquet(Path(args.laws) / "forecasts.parquet")
    figure = forecast_figure(metrics, forecasts, inputs.forecasts, metric, args.split, size_column(size_axis))
    save_figure(figure, out / "figures" / "answer")
    counts = json.loads(Path(args.example_counts).read_text()) if args.example_counts else {}
    warnings = counts.get("warnings", [])
    body = section(inputs, (out / "figures" / "answer.png").read_bytes(), warnings)
    write_text(out / "answer_section.html", body + "\n")
    write_text(out / "answer.html", page(args.title, body))
    write_text(out / "answer.md", markdown(args.title, inputs, warnings))


if __name__ == "__main__":
    main()
