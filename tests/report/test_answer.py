"""The answer page from a small synthetic results directory: every forecast status, observations
inside and outside their intervals, an untrained target, planning decisions present and absent."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rerank_scaling.report import answer, answer_page

SIZES = {"L1": 1e6, "L2": 2e6, "L3": 4e6, "L4": 8e6}  # non-embedding; total = +10M
FITTING = json.dumps({"metrics": ["nDCG@10"], "size_axis": "non_embedding"})

# (objective, protocol, law, observed, forecast, low, high, status): pointwise's observation falls
# outside both intervals, listwise's inside; every status occurs once or more.
TABLE8 = [
    ("listwise", "joint_code", "additive", 0.40, 0.41, 0.38, 0.44, "usable"),
    ("listwise", "model", "power_N", 0.40, 0.45, 0.20, 0.70, "too_wide"),
    ("pointwise", "joint_code", "additive", 0.30, 0.36, 0.33, 0.39, "beyond_validated_range"),
    ("pointwise", "model", "power_N", 0.30, 0.35, 0.32, 0.38, "form_sensitive"),
    ("pointwise", "joint_text", "additive", 0.30, 0.31, 0.29, 0.33, "usable"),  # not planning's
]
WHY = {
    "usable": "half-width 0.030; log-linear agrees",
    "too_wide": "half-width 0.250 exceeds the forecast's distance 0.050 from L3's 0.400",
    "beyond_validated_range": "extrapolation 2x exceeds the validated 1.3x",
    "form_sensitive": "log-linear forecasts 0.300, outside the half-width 0.030",
}


def _metrics() -> pd.DataFrame:
    rows = []
    for objective in ("listwise", "pointwise"):
        for model, size in SIZES.items():
            for step in (10, 20):
                rows.append(
                    {"run": f"{model}__{objective}", "model": model, "family": "ladder",
                     "role": "held_out" if model == "L4" else "fit", "params": size + 1e7,
                     "non_embedding_params": size, "objective": objective, "attention": "full",
                     "step": step, "split": "dev", "metric": "nDCG@10", "value": 0.1 + size / 4e7}
                )  # fmt: skip
    rows.append({"run": "bm25", "model": "bm25", "family": "bm25", "role": "baseline", "params": None,
                 "non_embedding_params": None, "objective": "bm25", "attention": "full", "step": 0,
                 "split": "dev", "metric": "nDCG@10", "value": 0.25})  # fmt: skip
    return pd.DataFrame(rows)


def _forecasts() -> pd.DataFrame:
    """Final-checkpoint forecasts of every size by each (protocol, law) of Table 8."""
    rows = []
    for objective, protocol, law, observed, forecast, low, high, _ in TABLE8:
        for model, size in SIZES.items():
            shift = (size - SIZES["L4"]) / 4e7
            rows.append(
                {"objective": objective, "attention": "full", "metric": "nDCG@10", "split": "dev",
                 "model": model, "role": "held_out" if model == "L4" else "fit", "final": True,
                 "size": size, "protocol": protocol, "law": law, "observed": observed + shift,
                 "held_out": True, "forecast": forecast + shift, "low": low + shift, "high": high + shift}
            )  # fmt: skip
    return pd.DataFrame(rows)


def write_results(root: Path, decisions: bool, plan: bool = True) -> Path:
    """results/<run>/ with metrics, laws (forecasts, fits, Table 8) and planning."""
    (root / "metrics").mkdir(parents=True)
    (root / "laws" / "tables").mkdir(parents=True)
    (root / "planning").mkdir()
    _metrics().to_parquet(root / "metrics" / "all.parquet")
    _forecasts().to_parquet(root / "laws" / "forecasts.parquet")
    fits = pd.DataFrame({"protocol": ["model", "joint_code", "joint_text"], "planning": [False, True, False]})
    fits.to_parquet(root / "laws" / "fits.parquet")
    table = pd.DataFrame(
        [
            {"objective": o, "attention": "full", "metric": "nDCG@10", "split": "dev", "protocol": p,
             "law": law, "model": "L4", "step": 20, "observed": obs, "forecast": f, "low": lo, "high": hi,
             "covered": lo <= obs <= hi, "forecast_status": s, "extrapolation": 2.0, "status": "ok",
             "reason": f"L4: {f:.3f} [{lo:.3f}, {hi:.3f}] at 2x the largest fitted size: {s}; {WHY[s]}"
             "; parameters: a = 1 on its upper bound (the forecast is judged on its interval)"}
            for o, p, law, obs, f, lo, hi, s in TABLE8
        ]
    )  # fmt: skip
    table.to_csv(root / "laws" / "tables" / "table08_final_checkpoint.csv", index=False)
    if decisions:
        pd.DataFrame(
            [
                {"objective": "listwise", "metric": "nDCG@10", "budget": 100.0, "verdict": "train L4",
                 "candidate": "L4", "p_best": 0.91, "expected_regret": 0.002, "p_roi": 0.7, "reason": "",
                 "split": "dev", "question": "budget"},
                {"objective": "pointwise", "metric": "nDCG@10", "budget": 100.0,
                 "verdict": "cannot decide", "candidate": "L3", "p_best": 0.55, "expected_regret": 0.01,
                 "p_roi": None, "reason": "P(best) 0.55 < 0.8", "split": "dev", "question": "budget"},
                {"objective": "pointwise", "metric": "CE@16", "budget": 100.0, "verdict": "train L1",
                 "candidate": "L1", "p_best": 0.99, "expected_regret": 0.0, "p_roi": None, "reason": "",
                 "split": "dev", "question": "budget"},
            ]
        ).to_csv(root / "planning" / "decisions.csv", index=False)  # fmt: skip
    if plan:
        pd.DataFrame(
            {"kind": ["profile", "budget", "budget"], "objective": [None, "listwise", "pointwise"],
             "metric": [None, "nDCG@10", "nDCG@10"], "split": [None, "dev", "dev"],
             "status": ["measured", "ok", "degenerate"], "budget": [None, 100.0, None],
             "model": [None, "L3", None], "reason": ["", "", "not identifiable: a = 1 on its upper bound"]}
        ).to_parquet(root / "planning" / "plan.parquet")  # fmt: skip
    return root


def build(root: Path, *extra: str) -> tuple[str, str]:
    """Run the stage's entry point on ``root``; (answer.md, answer.html)."""
    answer_page.main(
        ["--metrics", str(root / "metrics" / "all.parquet"), "--laws", str(root / "laws"),
         "--planning", str(root / "planning"), "--fitting", FITTING, "--split", "dev", "--out-dir", str(root),
         *extra]
    )  # fmt: skip
    return (root / "answer.md").read_text(), (root / "answer.html").read_text()


def _row(markdown: str, objective: str, law: str) -> str:
    (line,) = [x for x in markdown.splitlines() if x.startswith(f"| {objective} ") and f"| {law}" in x]
    return line


def test_every_status_and_observation_is_stated(tmp_path):
    markdown, page = build(write_results(tmp_path / "run", decisions=True))
    assert "Fitted on L1 (1M), L2 (2M), L3 (4M); forecast: L4 (8M) (N = non-embedding parameters)" in markdown
    usable = _row(markdown, "listwise", "additive (joint_code)")
    assert "0.4100 [0.3800, 0.4400]" in usable and "| usable " in usable and "| inside " in usable
    wide = _row(markdown, "listwise", "power_N (model)")
    assert "too wide to act on" in wide and WHY["too_wide"] in wide and "| inside " in wide
    beyond = _row(markdown, "pointwise", "additive (joint_code)")
    assert "beyond the validated range" in beyond and "| outside " in beyond and "0.3000" in beyond
    assert "depends on the law's form" in _row(markdown, "pointwise", "power_N (model)")
    # planning's joint protocol first, then the model law; not the other joint protocol
    assert markdown.index("additive (joint_code)") < markdown.index("power_N (model)")
    assert "joint_text" not in markdown
    # the reason without the restated interval and the parameter diagnostics
    assert "parameters: a = 1" not in markdown
    # the same table on the page, and the figure inside it
    table = re.search(r'<table[^>]*id="answer-forecasts".*?</table>', page, re.S).group(0)
    assert table.count("<tr") == 1 + 4
    assert "too wide to act on" in page and "outside" in page
    png = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert png and base64.b64decode(png.group(1)).startswith(b"\x89PNG")
    assert not re.search(r'src="(?!data:)', page), "the page must open without a server or other files"
    assert (tmp_path / "run" / "figures" / "answer.pdf").stat().st_size > 1000


def test_decisions_present_are_quoted_with_their_numbers(tmp_path):
    markdown, page = build(write_results(tmp_path / "run", decisions=True))
    assert "listwise, nDCG@10 at budget 100 (budget): train L4 (P(best) 0.91, expected regret 0.002, " \
        "P(ROI >= lambda) 0.70)." in markdown  # fmt: skip
    assert "pointwise, nDCG@10 at budget 100 (budget): cannot decide (P(best) 0.55, expected regret 0.01): " \
        "P(best) 0.55 < 0.8." in markdown  # fmt: skip
    assert "CE@16" not in markdown  # only the headline metric's verdicts
    verdicts = re.search(r'<table[^>]*id="answer-verdicts".*?</table>', page, re.S).group(0)
    assert verdicts.count("<tr") == 1 + 2 and "train L4" in verdicts and "0.91" in verdicts
    assert "<th>P(ROI &gt;= lambda)</th>" in verdicts and "<th>question</th>" in verdicts


def test_without_decisions_the_plan_budget_rows_give_the_verdict(tmp_path):
    markdown, _ = build(write_results(tmp_path / "run", decisions=False))
    assert "listwise, nDCG@10 at budget 100: train L3: point optimum of the central fit" in markdown
    assert "pointwise, nDCG@10: cannot decide (degenerate): not identifiable: a = 1" in markdown


def test_without_any_plan_the_answer_says_there_is_no_verdict(tmp_path):
    markdown, _ = build(write_results(tmp_path / "run", decisions=False, plan=False))
    assert answer.NO_DECISION in markdown


def test_a_target_size_that_was_not_trained_has_no_observation():
    forecasts = pd.DataFrame(
        [{"objective": "pointwise", "model": "1B", "size": 1e9, "forecast": 0.5, "low": 0.4, "high": 0.6,
          "forecast_status": "too_wide", "reason": "1B: ...: too_wide; half-width 0.1 exceeds 0.05"}]
    )  # fmt: skip
    (sentence,) = answer.forecast_sentences(forecasts)
    assert sentence == (
        "pointwise, 1B (1e+03M): 0.5000 [0.4000, 0.6000]; too wide to act on (half-width 0.1 exceeds 0.05); "
        "not trained, nothing to compare."
    )
    assert answer.forecast_table(forecasts)["inside?"].tolist() == ["not trained"]


def test_a_table_from_an_older_fit_stage_is_refused_naming_the_file(tmp_path):
    root = write_results(tmp_path / "run", decisions=True)
    path = root / "laws" / "tables" / "table08_final_checkpoint.csv"
    pd.read_csv(path).drop(columns="forecast_status").to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"table08_final_checkpoint.csv has no forecast_status.*fit_laws"):
        build(root)


def test_no_held_out_size_says_so(tmp_path):
    root = write_results(tmp_path / "run", decisions=True)
    (root / "laws" / "tables" / "table08_final_checkpoint.csv").write_text("\n")
    markdown, page = build(root)
    assert answer.NO_FORECAST in markdown and answer.NO_FORECAST in page
    assert "data:image/png;base64," in page


def test_thin_training_data_is_warned_on_the_answer_page(tmp_path):
    root = write_results(tmp_path / "run", decisions=True)
    warning = (
        "thin training data (pointwise examples): 20 of 24 training queries (83%, more than 10%) give none"
    )
    (root / "counts.json").write_text(json.dumps({"warnings": [warning]}))
    markdown, page = build(root, "--example-counts", str(root / "counts.json"))
    assert f"**Warning**: {warning}" in markdown and markdown.index(warning) < markdown.index("## ")
    assert f"<strong>Warning</strong>: {html.escape(warning)}" in page
    (root / "counts.json").write_text(json.dumps({"warnings": []}))
    assert "Warning" not in build(root, "--example-counts", str(root / "counts.json"))[0]


def test_the_answer_comes_first_in_one_sentence_per_objective(tmp_path):
    """Per objective: the held-out size's forecast by planning's law with its 95% interval, its
    status, the observation inside or outside, and what to train; before the question and tables."""
    root = write_results(tmp_path / "run", decisions=True)
    markdown, page = build(root)
    listwise = (
        "- **listwise**: L4 (8M) is forecast at 0.4100 [0.3800, 0.4400] by additive (joint_code), usable; "
        "observed 0.4000, inside the interval. What to train: train L4 (P(best) 0.91)."
    )
    pointwise = (
        "- **pointwise**: L4 (8M) is forecast at 0.3600 [0.3300, 0.3900] by additive (joint_code), beyond "
        "the validated range; observed 0.3000, outside the interval. What to train: cannot decide "
        "(P(best) 0.55)."
    )
    section = markdown.split("## The answer\n\n")[1].split("\n\n")[0]
    assert section.splitlines() == [listwise, pointwise]
    assert markdown.index("## The answer") < markdown.index("## The question") < markdown.index("| objective")
    headline = re.search(r'<h2>The answer</h2>\s*<ul id="answer-headline">(.*?)</ul>', page, re.S).group(1)
    assert headline.count("<li>") == 2 and html.escape(listwise[17:]) in headline
    assert page.index('id="answer-headline"') < page.index('id="answer-forecasts"')
    # an extrapolated choice says so
    decisions = pd.read_csv(root / "planning" / "decisions.csv").assign(extrapolated=[True, False, False])
    decisions.to_csv(root / "planning" / "decisions.csv", index=False)
    assert "train L4 (P(best) 0.91), extrapolated beyond the validated range." in build(root)[0]
    # without a plan the sentence says there is no verdict
    (root / "planning" / "decisions.csv").unlink()
    (root / "planning" / "plan.parquet").unlink()
    assert "What to train: no planning verdict" in build(root)[0]


def test_summary_states_the_answer_first(tmp_path):
    from rerank_scaling.report.summary import summary

    root = write_results(tmp_path / "run", decisions=True)
    metrics = pd.read_parquet(root / "metrics" / "all.parquet")
    metrics = metrics.assign(seed=1, checkpoint=metrics["step"], queries=50)
    text = summary(metrics, root / "laws", None, planning_dir=root / "planning")
    section = text.split("## The answer\n\n")[1].split("\n\n")[0].splitlines()
    assert len(section) == 2 and section[0].startswith("- **listwise**: L4 (8M) is forecast at 0.4100")
    assert section[0].endswith("What to train: train L4 (P(best) 0.91).")
    assert text.index("## The answer") < text.index("## The question") < text.index("## Claims")


def with_held_out_gaps(root: Path) -> Path:
    """``root`` with per-query tables in which listwise's held-out L4 (0.40) lies below L3 (0.50)
    beyond its paired SE and pointwise's L4 (0.30) above L3 (0.2925) within it."""
    metrics = pd.read_parquet(root / "metrics" / "all.parquet").assign(seed=1, queries=50)
    metrics["checkpoint"] = metrics["step"] // 10
    finals = {("listwise", "L3"): 0.50, ("pointwise", "L3"): 0.2925}
    for (objective, model), value in finals.items():
        rows = (metrics["objective"] == objective) & (metrics["model"] == model) & (metrics["step"] == 20)
        metrics.loc[rows, "value"] = value
    metrics.to_parquet(root / "metrics" / "all.parquet")
    rng = np.random.default_rng(0)
    difficulty = rng.normal(0.0, 0.2, 50)
    per_query = []
    for run in metrics.loc[metrics["family"] != "bm25", "run"].unique():
        final = metrics[(metrics["run"] == run) & (metrics["step"] == 20)].iloc[0]
        held_out = {"listwise": 0.40, "pointwise": 0.30}[final["objective"]]  # Table 8's observed
        centre = held_out if final["model"] == "L4" else final["value"]
        noise = rng.normal(0.0, 0.02, 50)
        values = centre + difficulty + noise - (difficulty + noise).mean()  # mean exactly ``centre``
        per_query += [
            {"run": run, "checkpoint": 2, "split": "dev", "metric": "nDCG@10", "qid": f"q{q}",
             "value": v, "n": 1}
            for q, v in enumerate(values)
        ]  # fmt: skip
    pd.DataFrame(per_query).to_parquet(root / "metrics" / "per_query.parquet")
    return root


def test_the_answer_says_plainly_when_the_held_out_size_scored_below_the_largest_fitted(tmp_path):
    """With the per-query table, each sentence compares the held-out size with the largest fitted
    size, query by query: listwise L4 (0.40) below L3 (0.50) beyond its paired SE; pointwise L4
    (0.30) against L3 (0.2925) within it."""
    root = with_held_out_gaps(write_results(tmp_path / "run", decisions=True))
    markdown, page = build(root, "--per-query", str(root / "metrics" / "per_query.parquet"))
    section = markdown.split("## The answer\n\n")[1].split("\n\n")[0].splitlines()
    below = "It scored below the largest fitted size, L3 (0.5000), by 0.1000 (paired SE 0.00"
    assert f"observed 0.4000, inside the interval. {below}" in section[0]
    assert section[0].endswith("below, beyond its noise. What to train: train L4 (P(best) 0.91).")
    assert "It scored above the largest fitted size, L3 (0.2925), by 0.0075 (paired SE 0.00" in section[1]
    assert "within its noise. What to train" in section[1]
    assert html.escape("It scored below the largest fitted size, L3 (0.5000)") in page
