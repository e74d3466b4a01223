"""Decisions with their uncertainty: P(best), expected regret, P(ROI >= lambda),
"cannot decide" with numbers, the validated range, the BNSL on converged models, allocation's axis."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from decision_simulation import (
    BEYOND,
    SIZES,
    TRUTHS,
    beyond_range,
    equal_compute,
    extrapolation,
    simulate,
    tied,
)
from scipy import stats

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.allocation import allocation_table
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.runner import run_protocols
from rerank_scaling.planning.decisions import argmax_statistics, decide, monte_carlo_se
from rerank_scaling.planning.forecast import MetricForecast, ValidatedRange
from rerank_scaling.settings import with_defaults

LABELS = ["L1", "L2", "L3"]


def test_a_clear_winner_is_trained_with_its_numbers():
    rng = np.random.default_rng(0)
    draws = 0.2 + rng.normal(0, 0.005, (200, 3)) + np.array([0.0, 0.01, 0.05])
    decision = decide(LABELS, draws, np.ones(3), 1.5, +1, 0.8)
    assert decision.verdict == "train L3" and decision.candidate == "L3"
    assert decision.p_best == 1.0 and decision.expected_regret == 0.0
    assert decision.reason.startswith("P(best) 1.00 for L3 vs 0.00 for")
    # a loss (sign -1): the smallest value is best
    assert decide(LABELS, draws, np.ones(3), 1.5, -1, 0.8).verdict == "train L1"


def test_exchangeable_candidates_cannot_be_decided_and_the_numbers_say_why():
    rng = np.random.default_rng(1)
    draws = 0.25 + rng.normal(0, 0.01, (400, 2))  # a tie: both candidates have the same distribution
    decision = decide(LABELS[:2], draws, np.ones(2), 1.5, +1, 0.8)
    assert decision.verdict == "cannot decide"
    assert 0.4 < decision.p_best < 0.6
    assert decision.reason.startswith(f"P(best) {decision.p_best:.2f} for ")
    assert "95% intervals overlap by" in decision.reason and "below 0.80" in decision.reason
    assert "tied within the draws' Monte Carlo noise" in decision.reason
    # the expected regret of either choice is the mean of |difference| / 2 ~ 0.01 / sqrt(pi)
    assert decision.expected_regret == pytest.approx(0.01 / np.sqrt(np.pi), rel=0.2)


def test_ties_within_a_draw_share_the_credit():
    utility = np.array([[1.0, 1.0, 0.0], [2.0, 0.0, 2.0], [0.0, 3.0, -np.inf]])
    p_best, regret = argmax_statistics(utility)
    np.testing.assert_allclose(p_best, [1 / 3, 1 / 2, 1 / 6])
    np.testing.assert_allclose(regret, [1.0, 2 / 3, 0.5])  # the infeasible draw has no regret


def test_candidates_beyond_the_validated_range_are_compared_and_flagged():
    law = laws.additive_law(+1)
    params = np.array([0.7, 0.2, 0.5, 0.05, 0.4])
    draws = params + np.random.default_rng(2).normal(0, 0.01, (100, 5))
    validated = ValidatedRange({"N": 2.0, "S": 0.5}, {"N": 8.0, "S": 2.0}, 1.5)
    forecast = MetricForecast(law, params, +1, draws=draws, validated=validated)
    n = np.array([4e6, 8e6, 16e6])  # the last is 2x the largest fitted size
    d = np.array([1.0e3, 1.0e3, 1.0e3])
    ratio = forecast.extrapolation(n, d)
    np.testing.assert_allclose(ratio, [1.0, 1.0, 2.0])
    assert np.isnan(forecast(n, d)[2]) and np.isfinite(forecast(n, d)[:2]).all()
    assert np.isnan(forecast.sample(n, d)[:, 2]).all()  # curves and optima stay inside the range
    sample = forecast.sample(n, d, extrapolate=True)  # a decision reads the law beyond it too
    assert sample.shape == (100, 3) and np.isfinite(sample).all()
    decision = decide(LABELS, sample, ratio, validated.ratio, +1, 0.8)
    table = decision.candidates.set_index("label")
    assert table.loc["L3", "status"] == "beyond_validated_range" and table.loc["L3", "p_best"] > 0.8
    assert table["p_best"].sum() == pytest.approx(1.0)
    assert "L3 at 2x is beyond the validated 1.5x (extrapolation)" in decision.reason
    # the larger the better (a - b N^-alpha grows): L3 wins, and the verdict says it extrapolates
    assert decision.verdict == "train L3" and decision.extrapolated
    inside = decide(LABELS[:2], sample[:, :2], ratio[:2], validated.ratio, +1, 0.8)
    assert inside.verdict == "train L2" and not inside.extrapolated
    # fewer examples than any fitted checkpoint saw is extrapolation too
    assert forecast.extrapolation(4e6, 100.0) == pytest.approx(5.0)
    poor = decide(LABELS, sample, ratio, 1.5, +1, 0.8, unaffordable=np.array([False, True, False]))
    assert poor.candidates["status"].tolist() == ["compared", "unaffordable", "beyond_validated_range"]
    assert "L2 is unaffordable" in poor.reason and poor.verdict == "train L3"
    alone = decide(LABELS, sample, ratio, 1.5, +1, 0.8, unaffordable=np.array([True, True, False]))
    assert alone.verdict == "train L3" and "the only candidate with a forecast" in alone.reason
    none = decide(LABELS, np.full((100, 3), np.nan), ratio, 1.5, +1, 0.8)
    assert none.verdict == "cannot decide" and "no candidate has a forecast" in none.reason


def test_a_ranking_below_the_threshold_is_a_preference_not_cannot_decide():
    """Gap 0.5 SD between two candidates: P(best) = Phi(0.5 / sqrt(2)) = 0.64 < 0.8, far above the
    runner-up's 0.36 given 2000 draws (Monte Carlo SE of the difference ~0.02): ``prefer``."""
    rng = np.random.default_rng(4)
    draws = rng.normal(0, 0.01, (2000, 2)) + np.array([0.0, 0.005])
    decision = decide(LABELS[:2], draws, np.ones(2), 1.5, +1, 0.8)
    assert decision.p_best == pytest.approx(stats.norm.cdf(0.5 / np.sqrt(2)), abs=0.03)
    assert decision.verdict == "prefer L2" and "below 0.80" in decision.reason
    assert monte_carlo_se(0.64, 0.36, 2000) == pytest.approx(np.sqrt((1 - 0.28**2) / 2000))


def test_the_budget_optimum_stays_inside_the_validated_range_and_says_it_hit_its_edge():
    from synthetic_runs import synthetic_costs, synthetic_forecast

    from rerank_scaling.planning.budget import optimal_allocation

    free = optimal_allocation(synthetic_forecast(), synthetic_costs(), 50.0, (1e5, 1e10))
    # fitted sizes 1-4 M (law scale), examples up to 4x beyond the unconstrained optimum's
    validated = ValidatedRange({"N": 1.0, "S": 0.01}, {"N": 4.0, "S": 4 * free.examples / 16e3}, 1.5)
    bounded = replace(synthetic_forecast(), validated=validated)
    inside = optimal_allocation(bounded, synthetic_costs(), 50.0, (1e5, 1e10))
    assert free.size > 6e6 and not free.at_boundary  # the unconstrained optimum lies beyond 1.5 x 4 M
    assert inside.status == "ok" and inside.size <= 6e6 * (1 + 1e-6) and inside.at_boundary
    assert inside.predicted < free.predicted
    hopeless = replace(
        synthetic_forecast(), validated=ValidatedRange({"N": 1e3, "S": 1.0}, {"N": 2e3, "S": 2.0}, 1.5)
    )
    nothing = optimal_allocation(hopeless, synthetic_costs(), 50.0, (1e5, 1e10))
    assert nothing.status == "infeasible" and "within the validated range (1.5x" in nothing.reason


def test_roi_probability_and_the_roi_constraint_per_draw():
    rng = np.random.default_rng(3)
    draws = np.column_stack([rng.normal(0.30, 0.01, 500), rng.normal(0.36, 0.01, 500)])
    cost = np.array([1.0, 4.0])
    roi = 100.0 * (draws - 0.3) / cost  # value 100 per point over a reference of 0.3
    decision = decide(["small", "large"], draws, np.ones(2), 1.0, +1, 0.8, roi, 1.0)
    table = decision.candidates.set_index("label")
    # P(ROI >= 1): small needs M >= 0.31 (1 sd above its mean), large M >= 0.34 (2 sd below)
    assert table.loc["small", "p_roi"] == pytest.approx(stats.norm.sf(1.0), abs=0.05)
    assert table.loc["large", "p_roi"] == pytest.approx(stats.norm.cdf(2.0), abs=0.03)
    assert decision.verdict == "train large" and decision.p_roi == table.loc["large", "p_roi"]
    # with the constraint of eqs. 5-6 in every draw, a candidate that fails it is never "best"
    feasible = roi >= 1.0
    constrained = decide(["small", "large"], draws, np.ones(2), 1.0, +1, 0.8, roi, 1.0, feasible)
    assert constrained.p_best == pytest.approx(feasible[:, 1].mean())


@pytest.mark.slow
def test_p_best_chooses_the_true_best_on_a_simulated_ladder():
    """Truths drawn from a spread (the gap between the best two candidates varies from 0 to ~0.02),
    the default's noise structure, 100 run-bootstrap refits: where P(best) >= 0.8, the true best
    is chosen in most replicates; where P(best) < 0.5, less often. The full table (200 replicates,
    P(best) bands, exact intervals): benchmarks/results/decisions_calibration.md.
    """
    result = simulate(200, equal_compute, seed=2)
    decided = result[result["verdict"].str.startswith("train ")]
    right = int((decided["chosen"] == decided["best"]).sum())
    assert len(decided) >= 40, "a 0.8 rule that never decides is not a planning tool"
    lower = stats.beta.ppf(0.05, right, len(decided) - right + 1)  # one-sided 95% Clopper-Pearson
    assert lower > 0.6, f"{right} of {len(decided)} decisions right: consistent with only >= {lower:.2f}"
    unsure = result[result["p_best"] < 0.5]
    assert (unsure["chosen"] == unsure["best"]).mean() < right / len(decided)


@pytest.mark.slow
def test_the_hard_truths_agree_with_the_additive_law_where_fitted_and_part_past_it():
    """The hard cases' truths (bench_decisions.py --hard) are the additive law at L1 and L4, so a
    ladder cannot tell them apart by its ends; past L4 the flattened one gains less and the one
    linear in ln N more; three of the four candidates lie beyond the fitted range."""
    p = np.array([1.0, 0.7, 0.1, 0.15, 0.3])
    ends = {"N": np.array([SIZES["L1"], SIZES["L4"]]), "S": np.array([2.1, 2.1])}
    past = {"N": np.array(list(BEYOND.values())), "S": np.array([2.1, 2.1])}
    additive = TRUTHS["additive"]
    for truth in TRUTHS.values():
        np.testing.assert_allclose(truth(p, ends), additive(p, ends), atol=1e-12)
    assert (TRUTHS["flatten past L4"](p, past) < additive(p, past) - 0.01).all()
    assert (TRUTHS["linear in ln N"](p, past) > additive(p, past)).all()
    labels, x = beyond_range(p)
    assert labels == ["L3", "L4", "L6", "L8"]
    assert (extrapolation(x) > 1).tolist() == [True, False, True, True]


def test_a_true_tie_is_mostly_not_trained_with_confidence():
    """Two candidates with exactly the same true metric. With bootstrap P(best) a ``train`` verdict
    needs the estimated gap to exceed ~0.84 of its standard error, which happens in ~40% of ladders
    when the draws' spread is right (24 of 100 in benchmarks/results/decisions_calibration.md); the
    rest are ``prefer`` or ``cannot decide``; any such choice has zero true regret."""
    result = simulate(100, tied, seed=3)
    undecided = int((~result["verdict"].str.startswith("train ")).sum())
    lower = stats.beta.ppf(0.05, undecided, len(result) - undecided + 1)
    assert lower > 0.3, f"{undecided} of {len(result)} ties undecided (>= {lower:.2f})"
    assert result["gap"].max() < 1e-9


# --- the BNSL on converged models, allocation on the configured step axis ------------------------------


def ladder_table(sizes: int):
    from rerank_scaling.laws.synthetic import synthetic_metrics_table

    spec = {f"s{i}": (2e6 * 1.6**i, 12e6 + 2e6 * 1.6**i, "fit") for i in range(sizes)}
    spec["s_held"] = (2e6 * 1.6**sizes, 12e6 + 2e6 * 1.6**sizes, "held_out")
    return synthetic_metrics_table(
        spec, objectives=("pointwise",), checkpoints=6, splits=("dev",), metrics=("nDCG@10",)
    )


def bnsl_fits(sizes: int) -> pd.DataFrame:
    settings = FitSettings.of(bootstrap=3, backtest=False)
    fits, _, _ = run_protocols(ladder_table(sizes), settings)
    return fits[fits["law"] == "bnsl1"]


def test_the_bnsl_is_refused_with_too_few_converged_models():
    fits = bnsl_fits(4)  # 4 fitted sizes x 6 checkpoints = 24 points, 4 of them converged
    assert len(fits) == 2 and (fits["status"] == "failed").all()  # both joint protocols
    assert (fits["n_fit"] == 4).all()
    reason = fits["reason"].iloc[0]
    assert reason.startswith("refused: the BNSL over converged models' FLOPs") and "6 parameters" in reason


def test_the_bnsl_fits_one_final_checkpoint_per_size():
    fits = bnsl_fits(8)
    assert (fits["n_fit"] == 8).all() and (fits["n_held_out"] == 1).all()
    assert (fits["status"] != "failed").all()


def test_allocation_uses_the_configured_step_axis():
    """The same law fitted on steps and on examples (16 per step) is one allocation: N / N*(C)
    must not depend on the axis (it did, when allocation read steps for an examples-axis fit)."""
    a, b, alpha, c, beta = 0.7, 0.2, 0.5, 0.05, 0.4
    per_step = 16.0
    on_examples = c * per_step**beta  # c S^-beta = c (E / 16)^-beta = c 16^beta E^-beta
    keys = {
        "family": "ladder",
        "objective": "pointwise",
        "attention": "full",
        "metric": "nDCG@10",
        "split": "dev",
        "annotations": "human",
    }
    steps = np.array([100.0, 200.0, 400.0])
    forecasts = pd.DataFrame(
        [
            {**keys, "model": f"s{i}", "step": s, "examples": s * per_step, "size": 4e6 * 2**i}
            | {"law": "additive", "split_label": "joint_code"}
            for i, s in enumerate(steps)
        ]
    )

    def table(c_value: float, axis: str) -> pd.DataFrame:
        params = json.dumps({"a": a, "b": b, "alpha": alpha, "c": c_value, "beta": beta})
        fits = pd.DataFrame(
            [{**keys, "protocol": "joint_code", "split_label": "joint_code", "law": "additive"}
             | {"status": "ok", "reason": "", "params": params, "planning": True}]
        )  # fmt: skip
        return allocation_table(fits, forecasts, axis)

    by_step, by_examples = table(c, "step"), table(on_examples, "examples")
    np.testing.assert_allclose(by_examples["n_over_n_star"], by_step["n_over_n_star"], rtol=1e-9)
    np.testing.assert_allclose(by_examples["compute"], by_step["compute"] * per_step)
    assert set(by_examples["step_axis"]) == {"examples"}
    # reading steps for the examples-axis fit (the old behaviour) gives another answer
    assert not np.allclose(table(on_examples, "step")["n_over_n_star"], by_step["n_over_n_star"])


def test_the_validated_range_spans_the_fitted_points_of_the_planning_protocol():
    """The additive law's range: every checkpoint of the fitted sizes (joint_code), never the
    held-out size; the BNSL's: the converged (final) points only; the ratio is the fit's own."""
    from rerank_scaling.planning.forecast import fit_points, law_for, validated_range

    table = ladder_table(4)  # s0-s3 fitted (2 M x 1.6^i), s_held held out; 6 checkpoints over 10-1000 steps
    points = fit_points(table, FitSettings.of())
    group = next(iter(points.values()))
    fit = pd.Series({"validated_ratio": 1.4})
    additive = validated_range(fit, law_for("additive", "nDCG@10"), group, FitSettings.of())
    assert additive.ratio == 1.4
    assert additive.low["N"] == pytest.approx(2.0) and additive.high["N"] == pytest.approx(2.0 * 1.6**3)
    assert additive.low["S"] == pytest.approx(0.01) and additive.high["S"] == pytest.approx(1.0)
    bnsl = validated_range(fit, law_for("bnsl1", "nDCG@10"), group, FitSettings.of())
    final = group[group["final"] & group["fitted"]]
    assert bnsl.low["C"] == pytest.approx(final["C"].min()) and bnsl.high["C"] == pytest.approx(
        final["C"].max()
    )
    assert bnsl.low["C"] > group[group["fitted"]]["C"].min()  # earlier checkpoints are not converged models
    # without a ratio in the fits table: fitting.validated_ratio, else 1
    assert (
        validated_range(
            pd.Series(dtype=object), law_for("additive", "nDCG@10"), group, FitSettings.of()
        ).ratio
        == 1.0
    )
    configured = FitSettings.of(validated_ratio=2.0)
    assert (
        validated_range(pd.Series(dtype=object), law_for("additive", "nDCG@10"), group, configured).ratio
        == 2.0
    )


def test_the_p_best_threshold_is_a_checked_config_key(default_config):
    from rerank_scaling.planning.plan_settings import PlanSettings
    from rerank_scaling.workflow.load import ConfigError, validate_config

    assert PlanSettings.of().decision_p_best == 0.8
    validate_config({**default_config, "planning": {"decision_p_best": 0.9}})
    with pytest.raises(ConfigError, match=r"planning\.decision_p_best.*0\.4"):
        validate_config({**default_config, "planning": {"decision_p_best": 0.4}})


def test_planning_clips_forecasts_at_the_reranking_ceiling_not_at_one():
    """nDCG@10 of a reranker of BM25's top k cannot exceed the oracle ordering of those k: planning's
    forecasts (and their draws) stop at the ceiling the fit stage bounded the group by."""
    from rerank_scaling.planning.forecast import fit_forecast, run_stats

    table = ladder_table(4)
    settings = FitSettings.of(bootstrap=5, backtest=False, ceilings=(("dev", "nDCG@10", 0.3),))
    fits, _, _ = run_protocols(table, settings)
    additive = fits[(fits["law"] == "additive") & (fits["protocol"] == "joint_code")].iloc[0]
    assert additive["ceiling"] == 0.3
    params = json.loads(additive["params"])
    assert params["a"] <= 0.3  # the fit itself was bounded by the ceiling
    # a law whose curve passes the ceiling (as the BNSL's, with no asymptote parameter, can)
    above = additive.copy()
    above["params"] = json.dumps({**params, "a": 0.9})
    stats = run_stats(table, with_defaults("training", {"max_length": 256}))
    forecast = fit_forecast(above, stats, settings)
    assert forecast.valid == (0.0, 0.3)
    assert forecast.law.predict(forecast.params, forecast.variables(1e12, 1e12)) > 0.3
    assert float(forecast(1e12, 1e12)) == 0.3
    without = fit_forecast(above.drop("ceiling"), stats, settings)
    assert without.valid == (0.0, 1.0)


def test_form_draws_go_through_the_argmax():
    """Two joint forms that each pick a size with confidence, but different sizes: each alone
    decides; their mixture (FormMixture, the decision's draws) cannot, and says how split it is."""
    from rerank_scaling.planning.forecast import FormMixture

    rng = np.random.default_rng(5)
    n = np.array([4e6, 8e6])
    d = np.array([1.0e3, 0.5e3])  # under a budget the larger size sees fewer examples
    data_hungry = np.array([0.7, 0.05, 0.5, 0.3, 0.4])  # a weak size term, a strong data term
    size_hungry = np.array([0.7, 0.3, 0.5, 0.02, 0.4])
    law = laws.additive_law(+1)

    def forecast(params: np.ndarray) -> MetricForecast:
        return MetricForecast(law, params, +1, draws=params + rng.normal(0, 0.002, (200, 5)))

    first, second = forecast(data_hungry), forecast(size_hungry)
    alone = [decide(LABELS[:2], f.sample(n, d), np.ones(2), 1.5, +1, 0.8) for f in (first, second)]
    assert [a.verdict for a in alone] == ["train L1", "train L2"]
    mixture = FormMixture((first, second), ("additive", "multiplicative"))
    draws = mixture.sample(n, d)
    assert draws.shape == (400, 2)
    both = decide(LABELS[:2], draws, mixture.extrapolation(n, d), 1.5, +1, 0.8)
    assert both.verdict == "cannot decide"
    assert both.p_best == pytest.approx(0.5, abs=0.05)


def test_one_line_per_objective_folds_the_budgets():
    from rerank_scaling.planning.objective_verdicts import objective_verdicts

    def row(objective, budget, verdict, p_best, extrapolated=False, question="budget"):
        return {"objective": objective, "metric": "nDCG@10", "split": "dev", "law": "additive",
                "question": question, "budget": budget, "verdict": verdict, "candidate": verdict.split()[-1],
                "p_best": p_best, "expected_regret": 1 - p_best, "p_roi": np.nan, "reason": f"why {budget}",
                "extrapolated": extrapolated}  # fmt: skip

    rows = pd.DataFrame(
        [
            row("pointwise", 10.0, "train L4", 0.9),
            row("pointwise", 1.0, "train L4", 0.95),
            row("listwise", 1.0, "prefer L4", 0.6),
            row("listwise", 10.0, "train L6", 0.85, extrapolated=True),
            row("listwise", 100.0, "train L6", 0.99, extrapolated=True),
            row("pairwise", 1.0, "cannot decide", np.nan),
            row("pairwise", 10.0, "cannot decide", np.nan),
            row("listwise", np.nan, "train L4", 0.8, question="roi"),
        ]
    )
    lines = objective_verdicts(rows)
    budget = lines[lines["question"] == "budget"].set_index("objective")
    assert len(lines) == 4 and len(budget) == 3  # one budget line per objective, the ROI line kept
    assert (
        budget.loc["pointwise", "verdict"] == "train L4"
        and budget.loc["pointwise", "budgets"] == "budgets 1, 10"
    )
    assert budget.loc["pointwise", "p_best"] == 0.9 and not budget.loc["pointwise", "extrapolated"]
    assert budget.loc["pointwise", "reason"] == "1: why 1.0; 10: why 10.0"
    assert budget.loc["listwise", "verdict"] == "prefer L4 at budget 1; train L6 at budgets 10, 100"
    assert budget.loc["listwise", "candidate"] == "L6" and budget.loc["listwise", "p_best"] == 0.6
    assert budget.loc["listwise", "extrapolated"]
    assert budget.loc["pairwise", "verdict"] == "cannot decide"
    assert budget.loc["pairwise", "reason"].startswith("budgets 1, 10: why 1.0")
