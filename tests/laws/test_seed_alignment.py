"""Seeds are averaged and compared at the steps they measured; held-out replicates estimate nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rerank_scaling.laws.fit_settings import GROUP_KEYS, FitSettings
from rerank_scaling.laws.protocols import prepare, seed_spread
from rerank_scaling.laws.synthetic import SIZES, synthetic_metrics_table


def _table(**seeds: int) -> pd.DataFrame:
    return synthetic_metrics_table(
        objectives=("pointwise",), splits=("dev",), metrics=("nDCG@10",), checkpoints=6, seeds=seeds,
        run_sigma=0.01,
    )  # fmt: skip


def test_seeds_sharing_their_checkpoints_are_averaged_as_before():
    """Where every seed measured the same steps (the workflow's grid), each point is the seeds'
    mean at one checkpoint, exactly as the rank alignment gave: the fit stage's tables are unchanged."""
    table = _table(s3=2, s4=3)
    points = prepare(table, FitSettings.of())
    by_checkpoint = table.groupby(["model", "checkpoint"])
    expected = by_checkpoint.agg(value=("value", "mean"), step=("step", "mean"), seeds=("seed", "nunique"))
    got = points.set_index(["model", "checkpoint"])[["value", "step", "seeds"]]
    pd.testing.assert_frame_equal(got.sort_index(), expected.sort_index(), check_dtype=False)
    assert points.columns[: len(GROUP_KEYS) + 3].tolist() == [*GROUP_KEYS, "model", "role", "checkpoint"]


def test_a_rerun_at_other_steps_makes_points_of_its_own_not_averages_of_ranks():
    table = _table(s3=2)
    second = (table["model"] == "s3") & (table["seed"] == 2)
    table.loc[second, "step"] += 1.0  # the rerun was evaluated one step later each time, its end too
    points = prepare(table, FitSettings.of()).query("model == 's3'")
    measured = set(table.loc[table["model"] == "s3", "step"])
    assert set(points["step"]) == measured and len(points) == 12 and (points["seeds"] == 1).all()


def test_seed_spread_compares_seeds_at_steps_both_measured():
    """Seed 2 skipped two of seed 1's last checkpoints; ranked within each seed, its last two would
    meet seed 1's last two (different steps). At the shared steps both seeds agree exactly."""
    table = _table(s3=2)
    s3 = table["model"] == "s3"
    table.loc[s3 & (table["seed"] == 2), "value"] = table.loc[s3 & (table["seed"] == 1), "value"].to_numpy()
    last_steps = sorted(table.loc[s3, "step"].unique())[-3:-1]
    table = table[~(s3 & (table["seed"] == 2) & table["step"].isin(last_steps))]
    table.loc[s3 & (table["seed"] == 1) & table["step"].isin(last_steps), "value"] += 0.05
    variance, dof = seed_spread(table, FitSettings.of(last_k=3))["nDCG@10"]
    assert dof == 1 and variance == 0.0  # compared at the last 3 steps both measured, not by rank


def test_held_out_replicates_do_not_move_the_noise_estimate():
    base = seed_spread(_table(s3=2), FitSettings.of())
    table = _table(s3=2, s4=2)  # s4 is held out (synthetic.SIZES)
    assert SIZES["s4"][2] == "held_out"
    held = (table["model"] == "s4") & (table["seed"] == 2)
    table.loc[held, "value"] += 0.3  # wildly different replicates at the held-out size
    assert seed_spread(table, FitSettings.of()) == base
    assert seed_spread(_table(s4=2), FitSettings.of()) == {}  # only held-out replicates: no estimate
    assert np.isfinite(base["nDCG@10"][0]) and base["nDCG@10"][1] == 1
