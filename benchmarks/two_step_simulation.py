"""Simulated ladders for the two-step forecast (laws/two_step.py), with known truth.

A loss law in N (CE@16 of a converged run: 2.2 + 0.66 N^-0.5, L1 2.70 to L6 2.45), a linear map to
the rank metric (nDCG@10 = U + V CE@16, as fitted on the default's runs) and the noise structure of
real runs: per-run offsets in both measurements, per-checkpoint noise, run noise growing with size
(sd x (N / N_L1)^0.25), and a CE seed spread pooled over three objectives' pairs at L4. L1-L4 are
fitted on five checkpoints each, L6 held out.

Used by ``tests/laws/test_two_step.py`` (the assertions) and ``benchmarks/bench_default_path.py``
(the numbers the README quotes, ``benchmarks/results/default_path.md``), at the same settings
(:data:`REPLICATES`, :data:`BOOTSTRAP`, :data:`SEED`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from default_path_simulation import judged

from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.forecast_status import StatusRule
from rerank_scaling.laws.two_step import fit_two_step

SIZES = {"L1": 1.77, "L2": 3.54, "L3": 5.31, "L4": 7.08, "L6": 10.62}
CHECKPOINTS = 5
KEYS = {"family": "ladder", "objective": "listwise", "attention": "full", "metric": "nDCG@10", "split": "dev"}
KEYS["annotations"] = "human"  # a group key since the annotation-source axis
U, V = 1.2, -0.38  # nDCG@10 = U + V CE@16, as fitted on the default's runs (0.16 .. 0.27 over its CE range)
CE_RUN_SD, NDCG_RUN_SD, CHECKPOINT_SD = 0.012, 0.010, 0.004
#: The slow test's and the benchmark's settings: replicates, bootstrap resamples, random seed.
REPLICATES, BOOTSTRAP, SEED = 200, 100, 11


def ce_final(size: float) -> float:
    """CE@16 of a converged run: a power law in N with an asymptote, L1 2.70 to L6 2.45."""
    return 2.2 + 0.66 * size**-0.5


def run_sd(size: float, base: float) -> float:
    return base * (size / SIZES["L1"]) ** 0.25


def ladder(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, tuple[float, float]]:
    """(CE rows, nDCG rows, CE seed spread) of one simulated ladder; L6 held out."""
    ce_rows, ndcg_rows = [], []
    for model, size in SIZES.items():
        ce_offset = rng.normal(0, run_sd(size, CE_RUN_SD))
        ndcg_offset = rng.normal(0, run_sd(size, NDCG_RUN_SD))
        for checkpoint in range(1, CHECKPOINTS + 1):
            ce = ce_final(size) + 0.25 * (1 - checkpoint / CHECKPOINTS) + ce_offset
            ce += rng.normal(0, CHECKPOINT_SD)
            ndcg = U + V * ce + ndcg_offset + rng.normal(0, CHECKPOINT_SD)
            common = {
                **KEYS, "model": model, "role": "held_out" if model == "L6" else "fit",
                "checkpoint": checkpoint, "step": 10.0 * checkpoint, "examples": 80.0 * checkpoint,
                "size": size * 1e6, "flops": size * 1e12 * checkpoint, "seeds": 1, "N": size,
                "final": checkpoint == CHECKPOINTS,
            }  # fmt: skip
            ce_rows.append({**common, "metric": "CE@16", "value": ce})
            ndcg_rows.append({**common, "value": ndcg})
    pairs = rng.normal(0, run_sd(SIZES["L4"], CE_RUN_SD), (3, 2))
    spread = (float(pairs.var(axis=1, ddof=1).mean()), 3.0)
    return pd.DataFrame(ce_rows), pd.DataFrame(ndcg_rows), spread


def simulate(replicates: int, bootstrap: int, seed: int = SEED) -> pd.DataFrame:
    """Per replicate: the two-step forecast of L6's final nDCG@10, its 95% interval, the observed
    value, whether it was covered and on which side a miss fell."""
    rng = np.random.default_rng(seed)
    settings = FitSettings.of(metrics=("nDCG@10", "CE@16"), bootstrap=bootstrap, last_k=1, uncertainty="run")
    rows = []
    for index in range(replicates):
        ce, ndcg, spread = ladder(rng)
        rule = StatusRule(2.0, 0.0)
        record, forecast = fit_two_step(KEYS, "CE@16", ce, ndcg, settings, index, spread, rule)
        assert record["status"] == "ok", record["reason"]
        held = forecast[forecast["held_out"]].iloc[0]
        rows.append({k: float(held[k]) for k in ("forecast", "low", "high", "observed")})
    return judged(pd.DataFrame(rows))
