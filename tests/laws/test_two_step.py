"""Two-step forecasts (laws/two_step.py) against known truth: the simulation of
``benchmarks/two_step_simulation.py`` (a loss law in N, a linear map to the rank metric, per-run offsets
in both measurements, per-checkpoint noise, run noise growing with size). The slow test's numbers
are the ones ``benchmarks/results/default_path.md`` reports (same settings)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from default_path_simulation import oracle_width
from two_step_simulation import BOOTSTRAP, KEYS, REPLICATES, U, ladder, simulate

from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.forecast_status import StatusRule
from rerank_scaling.laws.two_step import fit_map, fit_two_step, map_draws


def judged(frame: pd.DataFrame) -> tuple[float, float]:
    return float(frame["covered"].mean()), float(frame["width"].median() / oracle_width(frame))


def test_two_step_covers_without_overly_wide_intervals_quick():
    coverage, width = judged(simulate(40, 60))
    assert coverage >= 0.85  # 34 of 40: an exact 95% bound on true coverage >= 0.70
    assert width <= 2.0


@pytest.mark.slow
def test_two_step_covers_without_overly_wide_intervals():
    coverage, width = judged(simulate(REPLICATES, BOOTSTRAP))
    assert 0.90 <= coverage <= 0.985
    assert width <= 1.5


def test_a_map_the_wrong_way_is_refused():
    """If nDCG rose with CE on the fitted runs, the map would not be a ranking's loss: no forecast."""
    ce, ndcg, spread = ladder(np.random.default_rng(0))
    ndcg["value"] = 2 * U - ndcg["value"]
    settings = FitSettings.of(metrics=("nDCG@10", "CE@16"), bootstrap=20, last_k=1)
    record, forecast = fit_two_step(KEYS, "CE@16", ce, ndcg, settings, 0, spread, StatusRule(2.0, 0.0))
    assert record["status"] == "failed" and "not monotone" in record["reason"] and forecast.empty


def test_the_docs_quote_the_two_step_simulation_as_generated():
    """The forecasts page's two-step numbers are benchmarks/results/default_path.md's two-step row (generated
    by benchmarks/bench_default_path.py at the slow test's settings), not typed by hand."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    report = (repo / "benchmarks" / "results" / "default_path.md").read_text()
    section = report.split("## Two-step forecast", 1)[1]
    line = next(row for row in section.splitlines() if row.startswith("| two-step"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    coverage, width, above, below = cells[2], cells[3], cells[4], cells[5]
    readme = " ".join((repo / "docs" / "forecasts.md").read_text().split())
    assert f"it covers {coverage} (misses {above} above / {below} below) at {width}× the oracle's" in readme


def _resampled_fit_maps(pairs: pd.DataFrame, draws: int, seed: int) -> np.ndarray:
    """map_draws by its definition: fit_map on the chosen runs' rows concatenated (same draws)."""
    rng, runs = np.random.default_rng(seed), pairs["model"].unique()
    by_run = {run: part for run, part in pairs.groupby("model")}
    out = []
    for _ in range(draws):
        chosen = rng.choice(len(runs), size=len(runs), replace=True)
        while len(set(chosen)) < 2:
            chosen = rng.choice(len(runs), size=len(runs), replace=True)
        out.append(fit_map(pd.concat([by_run[runs[i]] for i in chosen])))
    return np.array(out)


@pytest.mark.parametrize("equal_losses", [False, True], ids=["spread", "all losses equal"])
def test_map_draws_are_fit_map_on_each_resample(equal_losses):
    """The per-run sums give fit_map's least squares on every resample, also where a resample's
    losses are all equal (no slope: the minimum-norm solution, as fit_map's lstsq gives, no error)."""
    rng = np.random.default_rng(3)
    rows = [
        (f"L{run}", 1.0 if equal_losses else 1.0 + 0.1 * run + rng.normal(0, 0.01), 0.3 + rng.normal(0, 0.01))
        for run in range(5)
        for _ in range(4)
    ]
    pairs = pd.DataFrame(rows, columns=["model", "loss", "target"])
    expected = _resampled_fit_maps(pairs, 50, seed=11)
    drawn = map_draws(pairs, 50, np.random.default_rng(11))
    np.testing.assert_allclose(drawn, expected, rtol=1e-7, atol=1e-9)
