"""The model-form ensemble forecasts only from members its fitted sizes identify."""

from __future__ import annotations

import numpy as np
import pandas as pd
from default_path_simulation import replicate

from rerank_scaling.laws.ensemble import fit_ensemble
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.forecast_status import StatusRule

KEYS = {
    "family": "ladder", "objective": "pointwise", "attention": "full", "metric": "nDCG@10", "split": "dev",
    "annotations": "human",
}  # fmt: skip


def ensemble_on(sizes: list[str]) -> tuple[dict, object]:
    sample = replicate(np.random.default_rng(3))
    columns = {**KEYS, "role": "fit", "step": 10.0, "examples": 80.0, "final": True}

    def table(rows):
        """Three checkpoints per run (last_k 3, as the tiny workflow fits), with the columns a
        forecast row carries."""
        noise = np.random.default_rng(4).normal(0, 0.003, (3, len(rows)))
        late = [rows.assign(checkpoint=k, value=rows["value"] + noise[k - 2]) for k in (2, 3, 4)]
        rows = pd.concat(late, ignore_index=True)
        return rows.assign(**columns, size=rows["N"] * 1e6, flops=rows["N"] * 1e12)

    fit_rows = table(sample.fit_rows[sample.fit_rows["model"].isin(sizes)])
    settings = FitSettings.of(bootstrap=50, last_k=3, uncertainty="run")
    return fit_ensemble(
        KEYS, "model", fit_rows, table(sample.held_rows), settings, 0, sample.spread, StatusRule(4.0, 0.05)
    )


def test_one_fitted_size_forecasts_nothing_and_says_why():
    """One size cannot place a curve in N: every member lacks distinct sizes, so no forecast (the
    tiny workflow's grid once printed a 'usable' ensemble interval from L1 alone)."""
    record, forecast = ensemble_on(["L1"])
    assert record["status"] == "failed"
    assert "log_linear_N: 1 distinct N for a law that needs 2" in record["reason"]
    assert "power_N_ceiling: 1 distinct N for a law that needs 2" in record["reason"]
    assert forecast.empty


def test_two_sizes_leave_out_the_free_power_law():
    record, forecast = ensemble_on(["L1", "L2"])
    assert record["status"] == "ok"
    assert record["formula"] == "equal-weight mixture of log_linear_N, power_N_ceiling (1/2 each)"
    assert "power_N: left out (2 distinct N for a law that needs 3)" in record["reason"]
    assert not forecast.empty


def test_four_sizes_mix_all_three_forms():
    record, _ = ensemble_on(["L1", "L2", "L3", "L4"])
    assert record["formula"].endswith("(1/3 each)")
