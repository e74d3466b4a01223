"""Advice with a budget: the maximal affordable plans, their preposterior widths against a linear
law's known answer, a case where spending the per-cost ranking down loses to the best plan, and
``rerank-scaling advise --budget``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_advise import README_CSV, advise_cli, hand_width, least_squares, line_group

from rerank_scaling.forecast.advise import (
    Candidate,
    Group,
    TargetForecast,
    advise,
    coherent_at,
    coherent_draws,
    interval_score,
    model_at,
)
from rerank_scaling.forecast.advise_plan import (
    PLAN_COLUMNS,
    advise_budget,
    affordable_plans,
    anchored_first,
    first_of_plan,
    largest_affordable,
)
from rerank_scaling.laws import ensemble
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.report.answer_advice import plan_sentence

FITTED = np.array([1e7, 2e7, 4e7, 8e7])
TARGET = 1e9


def plan_hand_width(added: list[float]) -> float:
    """The hand formula's sd at the target after every size in ``added`` joined the fitted ones."""
    return hand_width(np.append(FITTED, added[:-1]), added[-1], TARGET)


def test_the_affordable_plans_are_the_maximal_sets_within_the_budget():
    candidates = [Candidate(label, 1.0, cost) for label, cost in [("a", 4), ("b", 8), ("c", 16), ("d", 32)]]
    found = {tuple(candidates[i].label for i in plan) for plan in affordable_plans(candidates, 32)}
    assert found == {("d",), ("a", "b", "c")}  # {b, c} leaves 8: a still fits, so it is not maximal
    found = {tuple(candidates[i].label for i in plan) for plan in affordable_plans(candidates, 12)}
    assert found == {("a", "b")}
    assert affordable_plans(candidates, 3) == []


def test_plans_are_ranked_as_the_hand_formula_ranks_the_sets():
    """Known answer: the least-squares width after a set of runs is proportional to the hand
    formula's sd after all of them; the best plan is the formula's, and every plan's expected width
    is the formula's times one constant (common random numbers: the same z for every plan)."""
    sizes = {"160M": 1.6e8, "320M": 3.2e8, "640M": 6.4e8, "80M again": 8e7}
    costs = {"160M": 2.0, "320M": 4.0, "640M": 8.0, "80M again": 1.0}
    candidates = [Candidate(label, sizes[label], costs[label]) for label in sizes]
    plans = advise_budget(line_group(FITTED), TARGET, candidates, 8.0, outcomes=3, seed=2, fit=least_squares)
    assert plans.columns.tolist() == [*PLAN_COLUMNS, "members"]
    hand = {label: plan_hand_width([sizes[name] for name in label.split(" + ")]) for label in plans["plan"]}
    ratio = plans["expected_width"] / plans["plan"].map(hand)
    assert np.allclose(ratio, ratio.iloc[0], rtol=1e-9)
    by_width = plans.sort_values("expected_width")
    assert by_width["plan"].tolist() == sorted(hand, key=hand.get)
    assert by_width["plan"].iloc[0] == "640M"  # nearest the target beats three runs short of it
    assert (plans["cost"] <= 8.0).all() and plans["score"].is_monotonic_increasing
    assert (plans["score"] >= plans["expected_width"] - 1e-12).all()  # the width plus the misses
    by_criterion = advise_budget(
        line_group(FITTED), TARGET, candidates, 8.0, outcomes=3, seed=2, fit=least_squares, criterion="width"
    )
    assert by_criterion["plan"].tolist() == by_width["plan"].tolist()  # ranked by the expected width


def test_the_best_plan_beats_spending_the_per_cost_ranking_down():
    """The failure the plans fix: two cheap runs each reduce the width more per unit cost than the
    one dear run near the target, so spending the ranking down buys both; together they leave a
    wider interval (by the hand formula) than the dear run alone, and the plan buys that."""
    candidates = [
        Candidate("80M again", 8e7, 1.0),
        Candidate("160M", 1.6e8, 2.0),
        Candidate("640M", 6.4e8, 3.0),
    ]
    group = line_group(FITTED)
    ranking = advise(group, TARGET, candidates, outcomes=2, seed=1, fit=least_squares)
    greedy, left = [], 3.0
    for row in ranking.itertuples():
        if row.cost <= left:
            greedy.append(row.candidate)
            left -= row.cost
    assert greedy == ["80M again", "160M"]  # the ranking spent down: both cheap runs
    assert plan_hand_width([6.4e8]) < plan_hand_width([8e7, 1.6e8])  # but the dear one alone is better
    plans = advise_budget(group, TARGET, candidates, 3.0, outcomes=2, seed=1, fit=least_squares)
    plans = plans.sort_values("expected_width")  # the known answer is the width's
    assert plans["plan"].iloc[0] == "640M"
    ordered = first_of_plan(ranking, plans)
    assert ordered["candidate"].iloc[0] == "640M" and ordered["in_best_plan"].tolist() == [True, False, False]


def test_advise_with_a_budget_writes_the_plans_and_says_the_best(tmp_path, capsys):
    options = ("--target", "1e9", "--metric", "nDCG@10", "--bootstrap", "40", "--outcomes", "2")
    assert advise_cli(tmp_path, README_CSV, *options, "--budget", "5") == 0
    plans = pd.read_csv(tmp_path / "out" / "plans.csv")
    advice = pd.read_csv(tmp_path / "out" / "advice.csv")
    assert plans.columns.tolist() == PLAN_COLUMNS and (plans["cost"] <= 5).all() and len(plans) >= 2
    affordable = advice[advice["cost"] <= 5]
    anchor = affordable.sort_values(["size", "cost"], ascending=[False, True])["candidate"].iloc[0]
    holds = plans["plan"].str.split(" \\+ ").map(lambda members: anchor in members)
    assert holds.is_monotonic_decreasing and holds.iloc[0], "the plans with the largest affordable run first"
    for _, part in plans.groupby(holds):  # each part ranked by the expected width
        assert part["expected_width"].is_monotonic_increasing
    best = set(plans["plan"].iloc[0].split(" + "))
    assert advice["in_best_plan"].tolist() == [c in best for c in advice["candidate"]]
    assert advice["in_best_plan"].iloc[0]
    said = capsys.readouterr().out.splitlines()
    assert said[1] == plan_sentence(plans, 5.0)
    assert said[1].startswith(f"Budget 5: train {plans['plan'].iloc[0]} (cost ")
    # the plan's reduction with its Monte Carlo margin over the 2 outcomes (Student t, 1 df)
    assert f" ± {plans['reduction_margin'].iloc[0]:.2g} over 2 simulated outcomes)" in said[1]
    assert (plans["reduction_margin"] > 0).all()


@pytest.mark.parametrize(
    "budget,message",
    [("0", "--budget 0: give a positive cost"), ("nan", "--budget nan: give a positive cost")],
)
def test_a_bad_budget_is_named(tmp_path, capsys, budget, message):
    options = ("--target", "1e9", "--metric", "nDCG@10", "--budget", budget)
    assert advise_cli(tmp_path, README_CSV, *options) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_interval_score_is_the_width_plus_forty_times_the_miss():
    forecast = TargetForecast(0.2, 0.0, np.zeros((1, 1)), 0.4, 0.6, 0.5)
    assert interval_score(forecast, 0.5) == pytest.approx(0.2)  # covered: the width alone
    assert interval_score(forecast, 0.65) == pytest.approx(0.2 + 40 * 0.05)
    assert interval_score(forecast, 0.3) == pytest.approx(0.2 + 40 * 0.1)


def test_the_outcome_draws_share_one_misfit_path_per_row():
    """With a discrepancy term (a ladder that bends away at its largest fitted size), the joint draws
    outcomes come from add z s_1 ln(N / N_max) with one z per draw row: the added term divided by
    the distance is the same in every column beyond the fitted sizes."""
    sizes = np.array([1e7, 2e7, 4e7, 8e7])
    values = 0.2 + 0.02 * np.log(sizes / 1e6)
    values[-1] += 0.03  # the largest size off the curve: the inner origin misses it
    rows = line_group(sizes).fit_rows.assign(
        value=values, metric="nDCG@10", objective="pointwise", split="dev"
    )
    settings = FitSettings.of(metrics=("nDCG@10",), last_k=1, holdout_last=1, bootstrap=20)
    group = Group("nDCG@10", rows, settings)
    held = group.held([("target", 1e9), ("a", 3.2e8), ("b", 1.6e8)])
    args = (group.metric, rows, held, settings, 3, group.spread, None)
    usable = ensemble.usable_members(ensemble.fit_members(*args))
    per_ln_n, _ = ensemble.discrepancy_sd(group.metric, rows, settings, 3, group.spread, None)
    assert per_ln_n > 0
    added = (
        coherent_draws(group, usable, rows, 3)[:, len(rows) :] - ensemble.pooled_draws(usable)[:, len(rows) :]
    )
    distance = np.log(held["N"].to_numpy(float) / rows["N"].max())
    path = added / distance
    assert np.allclose(path, path[:, :1], atol=1e-9)  # one z per row
    assert np.std(path[:, 0]) == pytest.approx(per_ln_n, rel=0.3)  # z standard normal, scaled by s_1
    # the model world (--world model): the same mixture without the term
    model, coherent = model_at(group, rows, held, 3), coherent_at(group, rows, held, 3)
    assert np.allclose(model.draws, ensemble.pooled_draws(usable)[:, len(rows) :])
    assert np.allclose(coherent.draws - model.draws, added)


def test_anchored_plans_hold_the_largest_affordable_run_and_keep_their_order():
    """``anchor``: the largest candidate the budget buys alone (the cheaper of equal sizes) is in the
    first plan; within the plans that hold it, and within those that do not, the criterion's order
    stays."""
    candidates = [
        Candidate("80M again", 8e7, 1.0), Candidate("160M", 1.6e8, 2.0), Candidate("320M", 3.2e8, 4.0),
        Candidate("640M", 6.4e8, 9.0),
    ]  # fmt: skip
    assert candidates[largest_affordable(candidates, 8.0)].label == "320M"  # 640M is beyond the budget
    assert candidates[largest_affordable(candidates, 9.0)].label == "640M"
    table = pd.DataFrame({"plan": ["a", "b", "c", "d"], "members": [("80M again", "160M"), ("320M",),
                          ("160M",), ("80M again", "320M")]})  # fmt: skip
    assert anchored_first(table, "320M")["plan"].tolist() == ["b", "d", "a", "c"]
    plans = advise_budget(
        line_group(FITTED), TARGET, candidates[:3], 6.0, outcomes=3, seed=2, fit=least_squares, anchor=True
    )
    assert "320M" in plans["members"].iloc[0] and len(plans) == len(affordable_plans(candidates[:3], 6.0))
    many = [Candidate(f"{n}M", n * 1e6, 1.0 + n / 1000) for n in range(100, 1300, 100)]  # 12 runs
    assert len(affordable_plans(many, 4.0)) > 12  # more plans than are simulated: screened ...
    plans = advise_budget(line_group(FITTED), TARGET, many, 4.0, outcomes=2, seed=2, fit=least_squares)
    assert plans["members"].map(lambda members: "1200M" in members).all()  # ... among the anchored ones
