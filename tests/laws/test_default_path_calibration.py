"""Forecast intervals on the embedded default's own path: coverage AND width.

The simulation (``benchmarks/default_path_simulation.py``) has the default's structure: last_k = 1,
four fitted sizes, seeds at the largest fitted one, the asymptote on its bound, run noise growing
with size. Coverage must lie in [0.90, 0.985] and the median width within 1.5x the oracle's: an
interval too wide passes a coverage-only test, so width is asserted too, and the same assertions
are shown to reject the two wrong methods the old test let through (tau off, tau 5x too large).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from default_path_simulation import LAW, oracle_width, replicate, simulate, simulate_both

from rerank_scaling.laws import fit_statistics, protocols
from rerank_scaling.laws.fitting import fit_law, refit_multistart


def _judge(frame) -> tuple[float, float]:
    return float(frame["covered"].mean()), float(frame["width"].median() / oracle_width(frame))


@pytest.fixture(scope="module")
def default_path_ladders():
    """The bounded power law alone and the ensemble on the same 200 replicates (seed 1), from one pass
    (the law alone is the ensemble's power_N member: :func:`test_one_pass_gives_the_law_alone`). The
    law alone is judged by one test and is the baseline that the ensemble's test compares with."""
    single, ensemble = simulate_both(200, bootstrap=200, seed=1)
    assert single["low"].notna().all(), "every replicate's bounded law gives an interval"
    return single, ensemble


@pytest.fixture(scope="module")
def quick_ladders():
    """The same on 40 replicates (seed 2) for the quick suite's two tests."""
    single, ensemble = simulate_both(40, bootstrap=100, seed=2)
    assert single["low"].notna().all(), "every replicate's bounded law gives an interval"
    return single, ensemble


def test_one_pass_gives_the_law_alone():
    """simulate_both's law-alone table is simulate's (fit_split of LAW), value for value."""
    pd.testing.assert_frame_equal(
        simulate_both(6, bootstrap=40, seed=5)[0], simulate(6, bootstrap=40, seed=5)
    )


@pytest.mark.slow
def test_default_path_intervals_cover_at_nominal_and_are_not_too_wide(default_path_ladders):
    """200 replicates: binomial SE of the coverage ~0.015 at 0.95."""
    coverage, width_ratio = _judge(default_path_ladders[0])
    assert 0.90 <= coverage <= 0.985, coverage
    assert width_ratio <= 1.5, width_ratio


def test_default_path_intervals_quick(quick_ladders):
    """The same on 40 replicates (quick suite): looser bounds for the smaller sample."""
    coverage, width_ratio = _judge(quick_ladders[0])
    assert coverage >= 0.8, coverage
    assert width_ratio <= 2.0, width_ratio


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.0, 25.0], ids=["tau-off", "tau-5x"])
def test_the_assertions_reject_a_wrong_run_variance(monkeypatch, scale):
    """The run variance switched off (coverage fails) or 5x too large in sd (width fails)."""
    original = fit_statistics.variance_components

    def wrong(*args, **kwargs):
        right = original(*args, **kwargs)
        return dataclasses.replace(right, tau2=right.tau2 * scale)

    monkeypatch.setattr(protocols, "variance_components", wrong)
    coverage, width_ratio = _judge(simulate(100, bootstrap=100, seed=3))
    assert not (0.90 <= coverage <= 0.985 and width_ratio <= 1.5), (coverage, width_ratio)


def test_bootstrap_refits_reach_the_multistart_optimum():
    """Refits of default-like resamples end within 1% of a scipy multi-start optimum's cost."""
    rng = np.random.default_rng(0)
    sample = replicate(rng)
    x = {"N": sample.fit_rows["N"].to_numpy(float)}
    y = sample.fit_rows["value"].to_numpy(float)
    fit = fit_law(LAW, x, y)
    resamples = y[:, None] + rng.normal(0, 0.015, (len(y), 30))
    params, converged = refit_multistart(LAW, x, resamples, fit.params)
    assert converged.mean() >= 0.9
    worse = 0
    for column, found in zip(resamples.T, params, strict=True):
        best = fit_law(LAW, x, column)
        cost = 0.5 * ((LAW.predict(found, x) - column) ** 2).sum()
        worse += cost > best.cost * 1.01 + 1e-12
    assert worse <= 1, worse


def _lean(frame) -> str:
    return f"above {int(frame['above'].sum())}, below {int(frame['below'].sum())}"


def test_default_path_ensemble_quick(quick_ladders):
    """The model-form ensemble (laws/ensemble.py) on 40 replicates: coverage AND width."""
    frame = quick_ladders[1]
    coverage, width_ratio = _judge(frame)
    assert coverage >= 0.85, (coverage, _lean(frame))
    assert width_ratio <= 2.0, width_ratio


@pytest.mark.slow
def test_default_path_ensemble_covers_and_leans_less_than_the_bounded_law(default_path_ladders):
    """200 replicates, the same ladders for both (benchmarks/results/default_path.md, same settings:
    the bounded power law alone 184/200 = 0.920 with misses 14 above / 2 below, bias -0.0084; the
    ensemble with its discrepancy term and its members' median as the point forecast 188/200 =
    0.940, 7 above / 5 below, bias 0.0014, at 1.184x the oracle's median width)."""
    single, frame = default_path_ladders
    coverage, width_ratio = _judge(frame)
    assert 0.90 <= coverage <= 0.985, (coverage, _lean(frame))
    assert width_ratio <= 1.5, width_ratio
    assert frame["above"].sum() < single["above"].sum(), (_lean(frame), _lean(single))
    bias, single_bias = (float((f["forecast"] - f["observed"]).mean()) for f in (frame, single))
    assert abs(bias) < abs(single_bias), (bias, single_bias)
