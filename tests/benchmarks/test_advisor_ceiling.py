"""The advisor's ceiling (benchmarks/bench_advisor_ceiling.py): its oracles choose a plan on the
choosing draws and are scored on the others, and the verdict says which lower both the width and
the |error|, on tables whose answers are known by construction; one real ladder's rows are those of
the simulation's ladder."""

from __future__ import annotations

import argparse

import bench_advisor
import bench_advisor_ceiling as ceiling
import numpy as np
import pandas as pd

DRAWS = 4


def rows_of(plans: dict[str, tuple[float, float, bool]], ladders: int, noise: float = 0.0) -> pd.DataFrame:
    """Per ladder, plan and draw: (width, error, largest) of each plan, the same on every ladder,
    plus ``noise`` on the choosing draws only."""
    rng = np.random.default_rng(0)
    found = []
    for ladder in range(ladders):
        for plan, (width, error, largest) in plans.items():
            for draw in range(DRAWS):
                luck = noise * rng.standard_normal() if draw < DRAWS // 2 else 0.0
                found.append(
                    {"ladder": ladder, "kind": "plain", "plan": plan, "largest": largest, "draw": draw,
                     "width": width + luck, "error": error + luck, "score": width + error}
                )  # fmt: skip
    return pd.DataFrame(found)


def test_each_oracle_picks_the_plan_its_criterion_names_and_is_scored_on_other_draws():
    plans = {"L": (0.20, 0.040, True), "narrow": (0.18, 0.044, False), "accurate": (0.21, 0.036, False)}
    values = ceiling.oracle_values(rows_of(plans, 30), DRAWS)
    assert np.allclose(values["width the narrowest expected interval"], 0.18)
    assert np.allclose(values["error the smallest expected |error|"], 0.036)
    # no plan is better on both, so the guarded sum keeps the largest-affordable plan
    assert not values["other the smallest width + |error| ratio sum, neither worse than the largest's"].any()
    assert ceiling.beats_both(ceiling.intervals(values, np.random.default_rng(0))) == []
    # without noise on the choosing draws, one draw tells the oracles what two do
    table = ceiling.saturation_table(rows_of(plans, 30), DRAWS)
    assert table[0] == "| oracle: the plan with | choosing on 1 | choosing on 2 |"
    for line in table[2:]:
        first, second = (cell.strip() for cell in line.strip("|").split(" | ")[1:])
        assert first == second, line
    assert "| the narrowest expected interval | 0.900 / 1.100 |" in table[2]


def test_a_plan_better_on_both_is_found_by_every_oracle_and_called_so():
    plans = {"L": (0.20, 0.040, True), "better": (0.18, 0.036, False)}
    values = ceiling.oracle_values(rows_of(plans, 30), DRAWS)
    assert all(values[f"other {name}"].all() for name in ceiling.ORACLES)
    assert ceiling.beats_both(ceiling.intervals(values, np.random.default_rng(0))) == list(ceiling.ORACLES)


def test_luck_on_the_choosing_draws_is_not_credited():
    """Two equal plans: the choosing draws' noise makes an oracle pick either, but the scoring draws
    hold no noise, so its ratio is exactly 1 (scored on the choosing draws it would look better)."""
    plans = {"L": (0.20, 0.040, True), "twin": (0.20, 0.040, False)}
    values = ceiling.oracle_values(rows_of(plans, 40, noise=0.01), DRAWS)
    name = "the narrowest expected interval"
    assert 0 < values[f"other {name}"].sum() < 40
    assert np.allclose(values[f"width {name}"], values["width largest"])


def test_a_real_ladder_s_plans_are_the_simulation_s_and_the_report_reads():
    """Ladder 0 of seed 1 at few resamples: its plans are the simulation's maximal affordable plans,
    one holds the largest-affordable rule's buys, and the report names the oracles."""
    rows = pd.DataFrame(ceiling.plan_rows((0, 1, 8, 2)))
    setup, _ = bench_advisor.ladder_setup(0, 1)
    assert rows["plan"].nunique() == len(ceiling.affordable_plans(setup.candidates, setup.budget))
    assert rows.groupby("plan")["largest"].first().sum() == 1
    assert np.isfinite(rows[["width", "error", "score"]].to_numpy()).all()
    args = argparse.Namespace(ladders=1, seed=1, bootstrap=8, draws=2)
    text = ceiling.report(rows, args)
    assert all(name in text for name in ceiling.ORACLES)


def test_an_oracle_chooses_on_the_draws_it_is_given_only():
    """Draw 0 says "narrow" is narrower, draw 1 says much the opposite: choosing on one draw takes
    "narrow", on both the largest-affordable plan; the scoring draws (2, 3) are what it is credited."""
    found = []
    for draw, (big, narrow) in enumerate([(0.20, 0.18), (0.20, 0.30), (0.20, 0.19), (0.20, 0.19)]):
        for plan, width, largest in (("L", big, True), ("narrow", narrow, False)):
            found.append(
                {"ladder": 0, "kind": "plain", "plan": plan, "largest": largest, "draw": draw,
                 "width": width, "error": 0.04, "score": width}
            )  # fmt: skip
    rows = pd.DataFrame(found)
    name = "the narrowest expected interval"
    one, both = (ceiling.oracle_values(rows, DRAWS, k) for k in (1, 2))
    assert one[f"other {name}"].item() and one[f"width {name}"].item() == 0.19
    assert not both[f"other {name}"].item() and both[f"width {name}"].item() == 0.20
