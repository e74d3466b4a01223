"""Advice with a budget: the maximal affordable plans, their preposterior widths against a linear
law's known answer, a case where spending the per-cost ranking down loses to the best plan, and
``rerank-scaling advise --budget``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_advise import README_CSV, advise_cli, hand_width, least_squares, line_group

from rerank_scaling.forecast.advise import Candidate, advise
from rerank_scaling.forecast.advise_plan import (
    PLAN_COLUMNS,
    advise_budget,
    affordable_plans,
    first_of_plan,
)
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
    assert plans["plan"].tolist() == sorted(hand, key=hand.get)
    assert plans["plan"].iloc[0] == "640M"  # nearest the target beats three runs short of it
    assert (plans["cost"] <= 8.0).all() and (plans["score"] == plans["expected_width"]).all()


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
    assert plans["plan"].iloc[0] == "640M"
    ordered = first_of_plan(ranking, plans)
    assert ordered["candidate"].iloc[0] == "640M" and ordered["in_best_plan"].tolist() == [True, False, False]


def test_advise_with_a_budget_writes_the_plans_and_says_the_best(tmp_path, capsys):
    options = ("--target", "1e9", "--metric", "nDCG@10", "--bootstrap", "40", "--outcomes", "2")
    assert advise_cli(tmp_path, README_CSV, *options, "--budget", "5") == 0
    plans = pd.read_csv(tmp_path / "out" / "plans.csv")
    advice = pd.read_csv(tmp_path / "out" / "advice.csv")
    assert plans.columns.tolist() == PLAN_COLUMNS and (plans["cost"] <= 5).all() and len(plans) >= 2
    assert plans["score"].is_monotonic_increasing
    best = set(plans["plan"].iloc[0].split(" + "))
    assert advice["in_best_plan"].tolist() == [c in best for c in advice["candidate"]]
    assert advice["in_best_plan"].iloc[0]
    said = capsys.readouterr().out.splitlines()
    assert said[1] == plan_sentence(plans, 5.0)
    assert said[1].startswith(f"Budget 5: train {plans['plan'].iloc[0]} (cost ")


@pytest.mark.parametrize(
    "budget,message",
    [("0", "--budget 0: give a positive cost"), ("nan", "--budget nan: give a positive cost")],
)
def test_a_bad_budget_is_named(tmp_path, capsys, budget, message):
    options = ("--target", "1e9", "--metric", "nDCG@10", "--budget", budget)
    assert advise_cli(tmp_path, README_CSV, *options) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
