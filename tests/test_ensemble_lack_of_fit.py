"""The ensemble leaves out a nested form that the data reject (laws/ensemble.py, lack_of_fit).

Ladders of the default's shape (four fitted sizes, one value per run, seeds at the largest fitted
size: tests/default_path_simulation.py), with a known truth: a strongly bending power law, which
log-linear cannot follow, and a log-linear truth, which the power law contains.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rerank_scaling.laws.ensemble import fit_members, usable_members
from rerank_scaling.laws.protocols import FitSettings

SIZES = {"L1": 1.77, "L2": 3.54, "L3": 5.31, "L4": 7.08, "L6": 10.62}
SD = 0.004
SETTINGS = FitSettings(bootstrap=60, last_k=1, uncertainty="run")


def ladder(rng: np.random.Generator, truth) -> tuple[pd.DataFrame, pd.DataFrame, tuple[float, float]]:
    rows = []
    for model, size in SIZES.items():
        seeds = 2 if model == "L4" else 1
        value = float((truth(size) + rng.normal(0, SD, seeds)).mean())
        rows.append({"model": model, "N": size, "seeds": seeds, "value": value, "checkpoint": 4})
    table = pd.DataFrame(rows)
    pairs = rng.normal(0, SD, (3, 2))
    held = table["model"] == "L6"
    return table[~held], table[held], (float(pairs.var(axis=1, ddof=1).mean()), 3.0)


def rejected(truth, replicates: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    count = 0
    for index in range(replicates):
        fit_rows, held_rows, spread = ladder(rng, truth)
        fitted = fit_members("nDCG@10", fit_rows, held_rows, SETTINGS, index, spread)
        count += "log_linear_N" not in usable_members(fitted)
    return count


def test_a_bending_curve_rejects_log_linear_and_says_why():
    """0.6 - 0.5/N bends from 0.32 to 0.53 over the fitted sizes: log-linear misses by ~10 SDs."""
    rng = np.random.default_rng(0)
    fit_rows, held_rows, spread = ladder(rng, lambda n: 0.6 - 0.5 / n)
    fitted = fit_members("nDCG@10", fit_rows, held_rows, SETTINGS, 0, spread)
    assert "log_linear_N" not in usable_members(fitted)
    assert fitted["log_linear_N"].reason.startswith("rejected against power_N: F = ")
    assert "power_N" in usable_members(fitted)


def test_a_log_linear_truth_keeps_log_linear_at_about_the_test_level():
    """Under a log-linear truth the 5% test rejects rarely: at most 4 of 30 (a test
    rejecting at exactly 5% exceeds 4 of 30 with probability 0.016)."""
    assert rejected(lambda n: 0.10 + 0.06 * np.log(n), 30, 1) <= 4
