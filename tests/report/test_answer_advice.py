"""The answer page's "What to run next": the advise stage on a small results directory (fitted
sizes, a held-out size, measured cost profiles), then the page's sentence and table from its
advice.csv, and the page without one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_answer import SIZES, build, write_results

from rerank_scaling.forecast import advise_stage
from rerank_scaling.forecast.advise_table import ADVICE_COLUMNS
from rerank_scaling.report.answer_advice import NO_ADVICE, advice_table, form_sentence, next_sentence

FITTING = json.dumps({"metrics": ["nDCG@10"], "size_axis": "non_embedding", "bootstrap": 30})
#: Measured seconds per training example of each size (the plan's profile rows).
SECONDS = {"L1": 0.01, "L2": 0.018, "L3": 0.035, "L4": 0.07}


def with_advice(root: Path) -> Path:
    """``write_results``' run, its metrics with the columns the fit reads and a curve that bends,
    profile rows in the plan, and the advise stage run on it."""
    rng = np.random.default_rng(0)
    metrics = pd.read_parquet(root / "metrics" / "all.parquet")
    trained = metrics["family"] != "bm25"
    size = metrics["non_embedding_params"].fillna(1.0)
    curve = 0.6 - 0.5 * (size / 1e5) ** -0.3 + rng.normal(0, 0.004, len(metrics))
    metrics = metrics.assign(
        value=np.where(trained, curve, metrics["value"]), seed="13", examples=metrics["step"] * 16.0,
        tokens=metrics["step"] * 16.0, flops=6.0 * size * metrics["step"] * 16.0,
        checkpoint=metrics["step"] / 10,
    )  # fmt: skip
    metrics.to_parquet(root / "metrics" / "all.parquet")
    plan = pd.read_parquet(root / "planning" / "plan.parquet")
    profiles = pd.DataFrame(
        {"kind": "profile", "model": list(SECONDS), "size": [SIZES[m] for m in SECONDS],
         "train_seconds_per_example": list(SECONDS.values()), "status": "measured"}
    )  # fmt: skip
    pd.concat([plan, profiles], ignore_index=True).to_parquet(root / "planning" / "plan.parquet")
    advise_stage.main(
        ["--metrics", str(root / "metrics" / "all.parquet"), "--fits", str(root / "laws" / "fits.parquet"),
         "--plan", str(root / "planning" / "plan.parquet"), "--fitting", FITTING, "--split", "dev",
         "--objective", "pointwise", "--workers", "2", "--out", str(root / "planning" / "advice.csv")]
    )  # fmt: skip
    return root


@pytest.fixture(scope="module")
def advised(tmp_path_factory) -> Path:
    """One results directory with the advise stage run on it (16 outcomes per candidate), shared by
    the module's tests: they read it, and the page's build writes only its own files."""
    return with_advice(write_results(tmp_path_factory.mktemp("advised") / "run", decisions=True))


def test_the_advise_stage_ranks_the_grid_s_candidates_priced_from_the_profiles(advised):
    root = advised
    advice = pd.read_csv(root / "planning" / "advice.csv")
    assert advice.columns.tolist()[: len(ADVICE_COLUMNS)] == ADVICE_COLUMNS
    # L1-L3 again, the midpoints between them and to the target L4
    assert set(advice["candidate"]) == {
        "L1 (another seed)", "L2 (another seed)", "L3 (another seed)",
        "new size 1.41M", "new size 2.83M", "new size 5.66M",
    }  # fmt: skip
    assert (advice["target"] == "L4").all() and (advice["cost_unit"] == "device-hours").all()
    # device-hours: seconds per example (a power law through the profiles) x examples (20 x 16) / 3600
    l1 = advice.set_index("candidate").loc["L1 (another seed)", "cost"]
    assert abs(l1 - 0.01 * 320 / 3600) / l1 < 0.15
    assert advice["reduction_per_cost"].is_monotonic_decreasing


def test_the_answer_page_says_what_to_run_next_on_top_of_the_table(advised):
    root = advised
    advice = pd.read_csv(root / "planning" / "advice.csv")
    markdown, page = build(root)
    sentence = next_sentence(advice, "device-hours")
    assert sentence.startswith("Next: ")
    section = markdown.split("## What to run next (to be surer of the forecast)", 1)[1]
    assert section.lstrip().startswith(sentence)
    assert "For nDCG@10 on the dev split, pointwise: the forecast of L4 (8M)" in section
    assert "The law forms' point forecasts of the target now spread over" in section
    assert "| candidate run " in section and "| expected 95% width after it " in section
    assert '<p id="answer-advice"><strong>Next: ' in page and 'id="answer-advice-table"' in page


def test_without_advice_the_page_says_why(tmp_path):
    root = write_results(tmp_path / "run", decisions=True)
    pd.DataFrame(columns=ADVICE_COLUMNS).to_csv(root / "planning" / "advice.csv", index=False)
    markdown, page = build(root)
    assert NO_ADVICE in markdown and NO_ADVICE in page


def advice_rows(
    reductions: list[float], margins: list[float], tied: list[bool], costs: list[float] | None = None
) -> pd.DataFrame:
    """An advice table of candidates A, B, C (cost 1 unless given, width now 0.2), best first."""
    costs = costs or [1.0] * len(reductions)
    return pd.DataFrame(
        {"candidate": ["A", "B", "C"][: len(reductions)], "cost": costs, "width_now": 0.2,
         "expected_width": [0.2 - r for r in reductions], "expected_width_reduction": reductions,
         "reduction_per_cost": [r / c for r, c in zip(reductions, costs, strict=True)],
         "reduction_margin": margins, "tied_with_best": tied, "outcomes": 16}
    )  # fmt: skip


def test_the_sentence_names_a_run_only_beyond_the_simulation_s_noise():
    told = next_sentence(advice_rows([0.05, 0.04, 0.01], [0.02, 0.02, 0.02], [True, True, False]))
    assert told == (
        "Next: train A (cost 1); the target's interval is expected to shrink from 0.2 to 0.15 "
        "(reduction 0.05 ± 0.02 over 16 simulated outcomes). The simulation cannot tell it from B: "
        "their reductions per unit cost differ from its by less than the 95% Monte Carlo margin."
    )
    assert next_sentence(advice_rows([0.05, 0.01], [0.02, 0.02], [True, False])).endswith("outcomes).")
    unknown = next_sentence(advice_rows([0.015, 0.01], [0.02, 0.02], [True, True]))
    assert unknown.startswith("Next: unknown; the simulation cannot tell whether any candidate shrinks")
    assert "the best, A: reduction 0.015 ± 0.02 over 16 simulated outcomes" in unknown
    assert next_sentence(advice_rows([-0.01], [0.02], [True])).startswith("Next: unknown;")
    widens = next_sentence(advice_rows([-0.03], [0.02], [True]))
    assert widens.startswith("Next: no candidate is expected to shrink the target's interval (width 0.2;")
    # the default's run (planning/advice.csv): the cheapest gain within its noise, a dearer one beyond
    dearer = next_sentence(
        advice_rows([0.014, 0.023, 0.01], [0.019, 0.015, 0.02], [True, True, True], [1, 2, 4])
    )
    assert dearer.startswith(
        "Next: train B (cost 2); the target's interval is expected to shrink from 0.2 to 0.177"
    )
    assert dearer.endswith("Ranked ahead of it per unit cost, but within the simulation's noise: A.")
    rows = advice_rows([0.014, 0.023, 0.01], [0.019, 0.015, 0.02], [True, True, True], [1, 2, 4])
    spread = rows.assign(form_spread_now=0.02, expected_form_spread=[0.03, 0.01, 0.02])
    assert form_sentence(spread).endswith("after B, 0.01 expected.")  # the run the sentence names
    assert advice_table(rows)["not told from the best"].tolist() == ["yes", "yes", "yes"]
    one = next_sentence(advice_rows([0.05], [float("nan")], [True]))  # one outcome: no margin
    assert one.startswith("Next: train A") and "its noise unknown from 16 simulated outcomes" in one
