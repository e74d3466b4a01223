"""The model-discrepancy term of the ensemble (laws/discrepancy.py) against known truth; its effect
on coverage and width: tests/test_default_path_calibration.py (simulated ladders) and
benchmarks/results/ladders.md (real ones)."""

from __future__ import annotations

import numpy as np
import pytest

from rerank_scaling.laws import discrepancy


def test_the_excess_is_what_the_draws_did_not_expect():
    """Draws N(0, 1): an observation at their centre leaves no excess; one 3 sd off leaves
    sqrt(3^2 - 1) (the squared error beyond the draws' variance)."""
    draws = np.random.default_rng(0).standard_normal((20000, 1))
    assert discrepancy.excess_sd(draws, np.array([0.0])) == 0.0
    assert discrepancy.excess_sd(draws, np.array([3.0])) == pytest.approx(np.sqrt(8), rel=0.02)


def test_the_term_grows_with_ln_size_beyond_the_fitted_sizes_only():
    sizes = np.array([1.0, 2.0, 4.0, 8.0])
    assert discrepancy.inner_distance(sizes) == pytest.approx(np.log(2))
    assert discrepancy.distances(np.array([2.0, 8.0, 16.0, 64.0]), sizes) == pytest.approx(
        [0.0, 0.0, np.log(2), np.log(8)]
    )
    draws = np.zeros((5000, 3))
    widened = discrepancy.widen(draws, 0.1, np.array([0.0, np.log(2), np.log(8)]), 0)
    assert widened[:, 0].std() == 0.0
    assert widened[:, 1].std() == pytest.approx(0.1 * np.log(2), rel=0.05)
    assert widened[:, 2].std() == pytest.approx(0.1 * np.log(8), rel=0.05)
