"""answer.html in a real browser (headless Chromium): the forecast table and the figure are on the
page as opened from disk, without a server, and the page paints them (a screenshot).

The Snakemake report's landing page gets the same check in tests/workflow/test_workflow.py (it needs a
finished workflow)."""

from __future__ import annotations

import html

import pandas as pd
import pytest
from conftest import painted
from test_answer import build, with_held_out_gaps, write_results
from test_answer_advice import with_advice

from rerank_scaling.forecast.advise_stage import STAGE_OUTCOMES
from rerank_scaling.report.answer_advice import next_sentence
from rerank_scaling.report.browser import (
    INSTALL_HINT,
    find_chromium,
    landing_problems,
    rendered_dom,
    screenshot,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None, reason=f"no Chromium: {INSTALL_HINT}"),
]


def test_answer_html_opens_from_disk_with_table_and_figure(tmp_path):
    root = write_results(tmp_path / "run", decisions=True)
    build(root)
    dom = rendered_dom(root / "answer.html")
    assert landing_problems(dom) == []
    assert "beyond the validated range" in dom and "outside" in dom and "train L4" in dom
    # the answer first: one sentence per objective, above the question and the tables
    assert (
        dom.index('id="answer-headline"') < dom.index('id="answer-question"') < dom.index("answer-forecasts")
    )
    assert "What to train: train L4 (P(best) 0.91)" in dom
    # with the per-query table the sentence says plainly that the held-out size scored below
    build(with_held_out_gaps(root), "--per-query", str(root / "metrics" / "per_query.parquet"))
    dom = rendered_dom(root / "answer.html")
    assert "It scored below the largest fitted size, L3 (0.5000), by 0.1000" in dom
    assert "below, beyond its noise. What to train: train L4" in dom
    shot = screenshot(root / "answer.html", tmp_path / "answer.png", width=1400, height=1800)
    assert painted(shot) > 0.05


def test_the_next_run_is_on_the_page_as_a_reader_opens_it(tmp_path):
    """The answer's "What to run next": its sentence and the candidates' table, painted."""
    root = with_advice(write_results(tmp_path / "run", decisions=True))
    build(root)
    dom = rendered_dom(root / "answer.html")
    assert landing_problems(dom) == []
    assert "What to run next (to be surer of the forecast)" in dom
    advice = pd.read_csv(root / "planning" / "advice.csv")
    sentence = html.escape(next_sentence(advice, "device-hours"), quote=False)
    assert f'<p id="answer-advice"><strong>{sentence}</strong>' in dom and 'id="answer-advice-table"' in dom
    assert sentence.startswith("Next: ") and f"over {STAGE_OUTCOMES} simulated outcomes" in sentence
    assert "reduction per unit cost" in dom and "its 95% Monte Carlo margin" in dom
    shot = screenshot(root / "answer.html", tmp_path / "answer.png", width=1400, height=2200)
    assert painted(shot) > 0.05
