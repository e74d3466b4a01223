"""The advisor: its preposterior machinery against a linear law's known answer, and
``rerank-scaling advise`` on the README's table, a candidates file and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_cli import README_CSV, REPO

from rerank_scaling.forecast.advise import Candidate, Group, TargetForecast, advise
from rerank_scaling.forecast.advise_table import ADVICE_COLUMNS, default_candidates
from rerank_scaling.forecast.cli import main
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.forms import SCALES
from rerank_scaling.report.answer_advice import next_sentence

SIGMA = 0.01  # a run's known sd about the line
DRAWS = 4000


def least_squares(group: Group, rows: pd.DataFrame, held: pd.DataFrame, seed: int) -> TargetForecast:
    """A straight line in x = ln N by weighted least squares (a size's ``seeds`` averaged runs weigh
    ``seeds``), known sigma: draws of a new run at each held point, mean + sd z (z the same for the
    same seed, so two fits' widths differ by their sds alone)."""
    design = np.column_stack([np.ones(len(rows)), np.log(rows["N"].to_numpy(float))])
    weights = rows["seeds"].to_numpy(float)
    inverse = np.linalg.inv(design.T @ (design * weights[:, None]))
    beta = inverse @ design.T @ (weights * rows["value"].to_numpy(float))
    at = np.column_stack([np.ones(len(held)), np.log(held["N"].to_numpy(float))])
    sd = SIGMA * np.sqrt(1 + np.einsum("ij,jk,ik->i", at, inverse, at))
    z = np.random.default_rng(seed).standard_normal((DRAWS, len(held)))
    draws = at @ beta + z * sd
    low, high = np.percentile(draws[:, 0], [2.5, 97.5])
    return TargetForecast(float(high - low), 0.0, draws, float(low), float(high), float(at[0] @ beta))


def hand_width(fitted: np.ndarray, added: float, target: float) -> float:
    """sd of a new run at x* after adding x: sigma sqrt(1 + (1, x*) (X'X + x x')^-1 (1, x*)')."""
    xs = np.log(np.append(fitted, added))
    design = np.column_stack([np.ones(len(xs)), xs])
    at = np.array([1.0, np.log(target)])
    return float(SIGMA * np.sqrt(1 + at @ np.linalg.inv(design.T @ design) @ at))


def line_group(sizes: np.ndarray) -> Group:
    rows = pd.DataFrame(
        {"model": [f"M{i}" for i in range(len(sizes))], "size": sizes, "N": sizes / SCALES["N"],
         "value": 0.2 + 0.02 * np.log(sizes / 1e6), "seeds": 1, "role": "fit", "step": 1.0}
    )  # fmt: skip
    settings = FitSettings.of(metrics=("nDCG@10",), last_k=1, holdout_last=1, bootstrap=10)
    return Group("nDCG@10", rows, settings)


def test_the_preposterior_ranks_a_linear_law_s_candidates_as_the_hand_formula_does():
    """Known answer: for least squares the width after adding x is proportional to sqrt(1 + h(x*)),
    h from (X'X + x x')^-1; the advisor's expected widths are that formula's (one constant factor,
    the z draws' own quantile width), and its best candidate is the formula's."""
    fitted = np.array([1e7, 2e7, 4e7, 8e7])
    target = 1e9
    group = line_group(fitted)
    sizes = [1e7, 2e7, 8e7, 1.6e8, 3.2e8]
    candidates = [Candidate(f"N={n:g}", n, 1.0) for n in sizes]
    advice = advise(group, target, candidates, outcomes=3, seed=5, fit=least_squares)
    hand = {f"N={n:g}": hand_width(fitted, n, target) for n in sizes}
    ratio = advice["expected_width"] / advice["candidate"].map(hand)
    assert np.allclose(ratio, ratio.iloc[0], rtol=1e-9)  # widths proportional to the formula's sd
    assert advice["candidate"].iloc[0] == min(hand, key=hand.get) == "N=3.2e+08"
    assert advice["candidate"].tolist() == sorted(hand, key=hand.get)  # the whole ranking
    # a size already fitted is another seed: the same as two points at x (its weight 2)
    assert advice.set_index("candidate").loc["N=8e+07", "expected_width"] / ratio.iloc[0] == pytest.approx(
        hand_width(fitted, 8e7, target), rel=1e-9
    )
    now = hand_width(fitted[:-1], fitted[-1], target)  # the four fitted points as they are
    assert advice["width_now"].iloc[0] / ratio.iloc[0] == pytest.approx(now, rel=1e-9)
    # the widths do not depend on the outcome here: every candidate is told from the best
    assert advice["tied_with_best"].tolist() == [True] + [False] * (len(sizes) - 1)
    assert (advice["reduction_margin"] < 0.1 * advice["expected_width_reduction"].abs()).all()


def residual_least_squares(group: Group, rows: pd.DataFrame, held: pd.DataFrame, seed: int) -> TargetForecast:
    """The straight line of :func:`least_squares` with sigma estimated from its residuals: the
    width after a run, 2 t s sqrt(1 + h), depends on the run's outcome, as the ensemble's does, so
    a preposterior's expected width is a Monte Carlo estimate with noise of its own."""
    design = np.column_stack([np.ones(len(rows)), np.log(rows["N"].to_numpy(float))])
    weights, values = rows["seeds"].to_numpy(float), rows["value"].to_numpy(float)
    inverse = np.linalg.inv(design.T @ (design * weights[:, None]))
    beta = inverse @ design.T @ (weights * values)
    s = np.sqrt(np.sum(weights * (values - design @ beta) ** 2) / (len(rows) - 2))
    at = np.column_stack([np.ones(len(held)), np.log(held["N"].to_numpy(float))])
    sd = s * np.sqrt(1 + np.einsum("ij,jk,ik->i", at, inverse, at))
    draws = at @ beta + np.random.default_rng(seed).standard_normal((DRAWS, len(held))) * sd
    half = stats.t.ppf(0.975, len(rows) - 2) * sd[0]
    point = float(at[0] @ beta)
    return TargetForecast(2 * half, 0.0, draws, point - half, point + half, point)


def noisy_line_group() -> Group:
    group = line_group(np.array([1e7, 2e7, 4e7, 8e7]))
    noise = np.array([0.004, -0.006, 0.005, -0.002])  # residual sd about 0.006
    return Group(group.metric, group.fit_rows.assign(value=group.fit_rows["value"] + noise), group.settings)


def test_the_reduction_s_monte_carlo_margin_covers_its_expectation_and_is_not_too_wide():
    """Known truth: the expected reduction of a candidate under the residual-sigma line, from
    1500 outcomes. Over 60 simulation seeds of 8 outcomes each, the reported 95% margin covers it
    at nominal (at least 53 of 60: a true rate of 0.95 gives fewer with probability 0.01) and is
    the width its noise calls for (mean margin within 0.75-1.25 times t_7 sd / sqrt(8), the sd that
    of the 1500 outcomes' reductions)."""
    group, target, outcomes = noisy_line_group(), 1e9, 8
    candidate = [Candidate("N=1.6e+08", 1.6e8, 1.0)]
    truth = advise(group, target, candidate, outcomes=1500, seed=1000, fit=residual_least_squares).iloc[0]
    ideal = (
        stats.t.ppf(0.975, outcomes - 1)
        * truth["reduction_margin"]
        / stats.t.ppf(0.975, 1499)
        * np.sqrt(1500 / outcomes)
    )
    found = pd.concat(
        [advise(group, target, candidate, outcomes, seed, residual_least_squares) for seed in range(60)]
    )
    covered = (found["expected_width_reduction"] - truth["expected_width_reduction"]).abs() <= found[
        "reduction_margin"
    ]
    assert covered.sum() >= 53, covered.sum()
    assert 0.75 <= found["reduction_margin"].mean() / ideal <= 1.25, found["reduction_margin"].mean() / ideal


def test_two_runs_alike_are_mostly_tied_and_a_clearly_better_one_is_told_apart():
    """Two candidates at one size and price differ only by their simulated outcomes: over 40 seeds
    the simulation cannot tell them apart in at least 34 (a true rate of 0.95 gives fewer with
    probability 0.003). Rerunning the smallest size is told apart from a new size towards the
    target at every seed (the hand formula's widths differ by far more than the noise)."""
    group, target = noisy_line_group(), 1e9
    alike = [Candidate("A", 1.6e8, 1.0), Candidate("B", 1.6e8, 1.0), Candidate("rerun", 1e7, 1.0)]
    tables = [advise(group, target, alike, 8, seed, residual_least_squares) for seed in range(40)]
    tied = [t.set_index("candidate").loc[["A", "B"], "tied_with_best"].all() for t in tables]
    assert sum(tied) >= 34, sum(tied)
    assert all(t["candidate"].iloc[-1] == "rerun" and not t["tied_with_best"].iloc[-1] for t in tables)
    sentence = next_sentence(tables[int(np.argmax(tied))])
    best, other = ("A", "B") if "Next: train A " in sentence else ("B", "A")
    assert (
        sentence.startswith(f"Next: train {best} (cost 1); ") and f"cannot tell it from {other}:" in sentence
    )


def test_the_simulation_in_two_processes_gives_the_serial_numbers():
    group, candidates = noisy_line_group(), [Candidate(f"N={n:g}", n, 1.0) for n in (1e7, 1.6e8, 3.2e8)]
    serial = advise(group, 1e9, candidates, 6, 3, residual_least_squares)
    forked = advise(group, 1e9, candidates, 6, 3, residual_least_squares, workers=2)
    pd.testing.assert_frame_equal(serial, forked)


def test_cost_reorders_the_candidates():
    """Ranked by reduction per unit cost: the best reduction at ten times the price of the second
    best loses to it."""
    fitted = np.array([1e7, 2e7, 4e7, 8e7])
    group = line_group(fitted)
    candidates = [Candidate("big", 3.2e8, 10.0), Candidate("small", 1.6e8, 1.0)]
    advice = advise(group, 1e9, candidates, outcomes=2, seed=1, fit=least_squares)
    assert advice["candidate"].tolist() == ["small", "big"]
    assert (advice["expected_width_reduction"] > 0).all()
    big = advice.set_index("candidate").loc["big"]
    assert (
        big["expected_width_reduction"]
        > advice.set_index("candidate").loc["small", "expected_width_reduction"]
    )
    assert big["reduction_per_cost"] == pytest.approx(big["expected_width_reduction"] / 10.0)


def test_default_candidates_are_the_sizes_and_their_geometric_midpoints_priced_by_size():
    group = line_group(np.array([1e7, 4e7, 1.6e8]))
    found = {c.label: c for c in default_candidates(group, 6.4e8)}
    assert set(found) == {
        "M0 (another seed)",
        "M1 (another seed)",
        "M2 (another seed)",
        "new size 20M",
        "new size 80M",
        "new size 320M",
    }
    assert found["M0 (another seed)"].cost == 1.0 and found["new size 320M"].cost == pytest.approx(32.0)


def advise_cli(tmp_path: Path, csv: str, *options: str) -> int:
    runs = tmp_path / "runs.csv"
    runs.write_text(csv)
    return main(["advise", str(runs), "--out", str(tmp_path / "out"), *options])


def test_the_readme_example_gets_ranked_advice(tmp_path, capsys):
    """The README's hand-written table: every default candidate ranked; training towards the
    target (a new size between the largest and 1e9) beats rerunning the smallest size."""
    options = ("--target", "1e9", "--metric", "nDCG@10", "--bootstrap", "60", "--outcomes", "3")
    assert advise_cli(tmp_path, README_CSV, *options) == 0
    advice = pd.read_csv(tmp_path / "out" / "advice.csv")
    assert advice.columns.tolist() == ADVICE_COLUMNS
    assert len(advice) == 5 + 5  # the five sizes again, four midpoints and one to the target
    assert advice["reduction_per_cost"].is_monotonic_decreasing
    assert (advice["expected_width"] > 0).all() and (advice["cost"] > 0).all()
    by = advice.set_index("candidate")
    assert (
        by.loc["new size 632M", "expected_width_reduction"]
        > by.loc["S1 (another seed)", "expected_width_reduction"]
    )
    said = capsys.readouterr().out
    assert said.splitlines()[0] == next_sentence(advice)
    best = advice.iloc[0]
    if best["expected_width_reduction"] > best["reduction_margin"]:
        assert said.startswith(f"Next: train {best['candidate']} (cost ")
    else:  # 3 outcomes of 60-resample refits: a reduction within its Monte Carlo margin is no answer
        assert said.startswith("Next: unknown; the simulation cannot tell whether any candidate shrinks")
    assert f" ± {best['reduction_margin']:.2g} over 3 simulated outcomes" in said


def test_a_candidates_file_is_ranked_and_priced_as_given(tmp_path):
    rows = "".join(
        f"L{i},{n:g},{v:.4f}\n"
        for i, (n, v) in enumerate([(2e6, 0.21), (4e6, 0.24), (8e6, 0.262), (16e6, 0.285)])
    )
    (tmp_path / "candidates.csv").write_text("model,size,cost,steps\nrerun L4,16e6,4,100\nL5,32e6,8,100\n")
    options = ("--target", "1.28e8", "--candidates", str(tmp_path / "candidates.csv"), "--metric", "nDCG@10")
    assert (
        advise_cli(tmp_path, "model,size,value\n" + rows, *options, "--bootstrap", "40", "--outcomes", "2")
        == 0
    )
    advice = pd.read_csv(tmp_path / "out" / "advice.csv").set_index("candidate")
    assert set(advice.index) == {"rerun L4", "L5"}
    assert advice.loc["L5", "cost"] == 8 and advice.loc["rerun L4", "steps"] == 100


@pytest.mark.parametrize(
    "candidates,options,message",
    [
        (None, ("--target", "0"), "--target 0: a size is a positive parameter count"),
        (None, ("--target", "1e9", "--outcomes", "0"), "--outcomes 0: give a positive number"),
        ("model,size\nA,1e9\n", ("--target", "1e9"), "candidates.csv: missing column(s) cost"),
        (
            "model,size,cost\nA,1e9,-2\n",
            ("--target", "1e9"),
            "candidates.csv:2: cost -2; give a positive number",
        ),
        (
            "model,size,cost\nA,1e9,2\nA,2e9,3\n",
            ("--target", "1e9"),
            "candidates.csv:3: candidate 'A' is listed twice",
        ),
        ("", ("--target", "1e9"), "candidates.csv: the file is empty (0 bytes)"),
    ],
)
def test_bad_advice_input_names_the_option_or_line(tmp_path, capsys, candidates, options, message):
    if candidates is not None:
        (tmp_path / "candidates.csv").write_text(candidates)
        options = (*options, "--candidates", str(tmp_path / "candidates.csv"))
    assert advise_cli(tmp_path, README_CSV, *options, "--metric", "nDCG@10") == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and message in said, said
    assert not (tmp_path / "out").exists()


def advisor_quotes() -> list[str]:
    """The forecasts page's sentences on the advisor, built from benchmarks/results/advisor.md's cells."""
    report = (REPO / "benchmarks" / "results" / "advisor.md").read_text()

    def cells(prefix: str) -> list[str]:
        line = next(x for x in report.splitlines() if x.startswith(prefix))
        return [c.strip() for c in line.strip("|").split(" | ")]  # "|error|" is one cell

    width, error = cells("| mean 95% interval width"), cells("| mean |error|")
    best_plans = report.split("smallest realised |error| of them in ", 1)[1].split(" ladders", 1)[0]
    calibration = cells("| all |")
    ladders = report.split("## Simulation", 1)[1].split("\n\n", 2)[1].split(" ladders", 1)[0]
    replay = next(x for x in report.splitlines() if x.startswith("At the first budget:"))
    speed = (REPO / "benchmarks" / "results" / "advisor_speed.md").read_text()
    command, stage = (line for line in speed.splitlines() if "one process: CPU time " in line)
    forked = next(line for line in speed.splitlines() if "2 processes: wall " in line)
    resamples = command.split(" resamples (the fit stage's)", 1)[0].rsplit(" ", 1)[1]

    def cpu(line: str) -> str:
        return line.split("one process: CPU time ", 1)[1].split(" s,", 1)[0]

    scored = report.split(" ladders of seed ", 1)[1].split(" ", 1)[0]
    developed = report.split("developed on ladders of seed ", 1)[1].split(",", 1)[0]
    return [
        f"developed on ladders of seed {developed}, frozen, then scored once on seed {scored}",
        f"On {ladders} simulated ladders the advisor's purchases leave a target interval {width[4]} times "
        f"as wide as buying the largest affordable size and {width[5]} times as wide as random "
        f"affordable runs, with an |error| {error[4]} and {error[5]} times theirs",
        f"its expected width reduction averages {calibration[2]} against {calibration[3]} realised",
        f"in hindsight leaves {error[7]} times the largest rule's mean |error|, and the largest "
        f"rule's plan was that best plan in {best_plans} ladders",
        replay,
        f"At the fit stage's {resamples} resamples the command's 4 outcomes per candidate take "
        f"{cpu(command)} s of CPU time and the stage's 16 take {cpu(stage)} s in one process, "
        f"{forked.split('2 processes: wall ', 1)[1].split(' s,', 1)[0]} s of wall time in the workflow's 2",
    ]


def ceiling_quote() -> str:
    """The forecasts page's sentence on what knowing the true law would buy, from the first (all
    ladders) table of benchmarks/results/advisor_ceiling.md."""
    report = (REPO / "benchmarks" / "results" / "advisor_ceiling.md").read_text()

    def cells(oracle: str) -> list[str]:
        line = next(x for x in report.splitlines() if x.startswith(f"| {oracle} |"))
        return [c.strip() for c in line.strip("|").split(" | ")]

    width = cells("the narrowest expected interval")
    error = cells("the smallest expected |error|")
    both = cells("the smallest width + |error| ratio sum, neither worse than the largest's")
    ladders = report.split("All ", 1)[1].split(" ladders", 1)[0]
    return (
        f"choosing the narrowest expected interval, it reaches a width {width[1]} and an |error| "
        f"{width[2]} times the largest rule's; choosing the smallest expected |error|, a width "
        f"{error[1]} and an |error| {error[2]}; lowering both at once, a width {both[1]} and an "
        f"|error| {both[2]} (on all {ladders} ladders"
    )


def test_the_docs_quote_the_advisor_benchmark_as_generated():
    readme = " ".join((REPO / "docs" / "forecasts.md").read_text().split())
    for quote in [*advisor_quotes(), ceiling_quote()]:
        assert " ".join(quote.split()) in readme, quote


def advice_noise_quote() -> str:
    """The forecasts page's sentence on the advice's Monte Carlo noise, from
    benchmarks/results/advice_noise.md's summary table (K, distinct first-ranked, outside, sentences)."""
    report = (REPO / "benchmarks" / "results" / "advice_noise.md").read_text()
    rows = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0].isdigit():
            rows[int(cells[0])] = (cells[1].split(" ", 1)[0], cells[2].replace(" pairs", ""), cells[3])
    seeds = len({line.split(" | ")[1] for line in report.splitlines() if line.count(" | ") == 7
                 and line.split(" | ")[1].strip().isdigit()})  # fmt: skip
    (few, many) = sorted(rows)
    return (
        f"over {seeds} simulation seeds, the first-ranked run was one of {rows[few][0]} candidates at "
        f"{few} outcomes and one of {rows[many][0]} at {many}; a seed's first-ranked run lay outside "
        f"another seed's tied set in {rows[few][1]} pairs at {few} outcomes and {rows[many][1]} at {many}. "
        f"The answer's sentence at {many} outcomes (train / unknown / no candidate): {rows[many][2]}"
    )


def test_the_docs_quote_the_advice_noise_benchmark_as_generated():
    page = " ".join((REPO / "docs" / "forecasts.md").read_text().split())
    assert advice_noise_quote() in page, advice_noise_quote()
