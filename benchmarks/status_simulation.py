"""Simulated ladders whose scaling may break beyond the fitted sizes: when the engine labels a
forecast ``usable``, is the held-out observation inside its interval?

The setup of the forecasting audit, through the public :func:`rerank_scaling.forecast.run.forecast_runs`
(uncertainty ``run``): one value per run; fitted sizes 10/20/40/80M with two seeds at 80M (a
three-size ladder: 10/20/40M, two seeds at 40M); forecasts at 2x and 8x the largest fitted size.

* truth: the control 0.55 - 0.88 n^-0.4 (n in millions), or a log-linear curve through the
  control's values at the smallest and the largest fitted size;
* a break at 1.25x the largest fitted size (100M; 50M for the three-size ladder), beyond which the
  remaining gains are multiplied by 0.25 (flatten), 0 (plateau) or 2 (steepen): the fitted sizes
  cannot show it, so every break shares its fit with the unbroken truth (one fit, several
  held-out truths; each held-out observation is its truth plus a fresh run's noise);
* run noise: sd 0.01, or heteroscedastic, sd 0.005 (n / 10)^0.6 (0.017 at 80M, 0.026 at 160M).

A miss is an observation outside the forecast's 95% interval. P(miss | usable) is counted over the
forecasts labelled usable (every row is one replicate's one size, independent across replicates),
with its exact (Clopper-Pearson) 95% interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rerank_scaling.forecast.run import forecast_runs
from rerank_scaling.registries.measures import MetricSpec

METRIC = MetricSpec("simulated_accuracy", +1, (0.0, 1.0))
LAWS = ("ensemble", "power_N")
#: Break multipliers of the remaining gains beyond the break point.
BREAKS = {"none": 1.0, "flatten x0.25": 0.25, "plateau": 0.0, "steepen x2": 2.0}
RATIOS = (2.0, 8.0)


def control(n: np.ndarray) -> np.ndarray:
    return 0.55 - 0.88 * np.asarray(n, float) ** -0.4


@dataclass(frozen=True)
class Base:
    """What one fit sees: the ladder's fitted sizes (millions; two seeds at the largest), its truth
    up to the largest fitted size and its run noise."""

    name: str
    fitted: tuple[float, ...]
    truth: str = "control"  # or "log-linear"
    noise: str = "constant"  # or "growing"
    breaks: tuple[str, ...] = tuple(BREAKS)

    def smooth(self, n: np.ndarray) -> np.ndarray:
        if self.truth == "control":
            return control(n)
        low, high = min(self.fitted), max(self.fitted)
        slope = (control(high) - control(low)) / np.log(high / low)
        return control(low) + slope * np.log(np.asarray(n, float) / low)

    def truth_at(self, n: np.ndarray, scaling: str) -> np.ndarray:
        brk = 1.25 * max(self.fitted)
        n = np.asarray(n, float)
        smooth, at_break = self.smooth(n), self.smooth(np.array(brk))
        return np.where(n > brk, at_break + BREAKS[scaling] * (smooth - at_break), smooth)

    def sd(self, n: np.ndarray) -> np.ndarray:
        n = np.asarray(n, float)
        return np.full(n.shape, 0.01) if self.noise == "constant" else 0.005 * (n / 10) ** 0.6

    def targets(self) -> tuple[float, ...]:
        return tuple(r * max(self.fitted) for r in RATIOS)


FOUR = (10.0, 20.0, 40.0, 80.0)
THREE = (10.0, 20.0, 40.0)
BASES = (
    Base("4 sizes", FOUR),
    Base("4 sizes, log-linear truth", FOUR, truth="log-linear", breaks=("none",)),
    Base("4 sizes, growing noise", FOUR, noise="growing"),
    Base("3 sizes", THREE),
)


def runs(base: Base, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated ladder's fitted runs (model, size, value, seed, role)."""
    rows = []
    for n in base.fitted:
        seeds = 2 if n == max(base.fitted) else 1
        for seed in range(seeds):
            value = float(base.smooth(np.array(n)) + rng.normal(0, float(base.sd(np.array(n)))))
            rows.append({"model": f"M{n:g}", "size": n * 1e6, "value": value, "seed": seed, "role": "fit"})
    return pd.DataFrame(rows)


def replicate(base: Base, rng: np.random.Generator, bootstrap: int, seed: int) -> pd.DataFrame:
    """One fit of ``base`` and its forecasts at 2x and 8x, judged under every break of the base."""
    targets = base.targets()
    result = forecast_runs(
        runs(base, rng), target_sizes=tuple(t * 1e6 for t in targets), metric=METRIC,
        bootstrap=bootstrap, seed=seed, uncertainty="run",
    )  # fmt: skip
    rows = result.forecasts[result.forecasts["law"].isin(LAWS)]
    sizes = rows["size"].to_numpy(float) / 1e6
    noise = rng.standard_normal(len(targets))  # a fresh run per size, shared by the breaks
    draw = dict(zip(targets, noise * base.sd(np.array(targets)), strict=True))
    frames = []
    for scaling in base.breaks:
        observed = base.truth_at(sizes, scaling) + np.array([draw[s] for s in sizes])
        frames.append(
            rows[["law", "forecast", "low", "high", "forecast_status", "reason"]].assign(
                base=base.name,
                scaling=scaling,
                ratio=sizes / max(base.fitted),
                observed=observed,
                truth=base.truth_at(sizes, scaling),
            )  # fmt: skip
        )
    frame = pd.concat(frames, ignore_index=True)
    frame["miss"] = (frame["observed"] < frame["low"]) | (frame["observed"] > frame["high"])
    return frame


def simulate(
    replicates: int, bootstrap: int = 100, seed: int = 0, bases: tuple[Base, ...] = BASES,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Every base's replicates (rows: replicate, law, size and break)."""
    frames = []
    for b, base in enumerate(bases):
        rng = np.random.default_rng([seed, b])
        for index in range(replicates):
            frames.append(replicate(base, rng, bootstrap, seed + index).assign(replicate=index))
        if progress:
            progress(f"{base.name}: {replicates} replicates")
    return pd.concat(frames, ignore_index=True)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided interval of a binomial proportion from k of n (Clopper & Pearson 1934)."""
    if n == 0:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    low = float(stats.beta.ppf(tail, k, n - k + 1)) if k else 0.0
    high = float(stats.beta.ppf(1 - tail, k + 1, n - k)) if k < n else 1.0
    return low, high


def reliability(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (base, break, law): forecasts, usable rate, P(miss | usable) with its exact 95% interval,
    and the coverage of every forecast at 2x and at 8x."""
    out = []
    for (base, scaling, law), part in rows.groupby(["base", "scaling", "law"], sort=False):
        usable = part[part["forecast_status"] == "usable"]
        misses = int(usable["miss"].sum())
        low, high = clopper_pearson(misses, len(usable))
        out.append(
            {
                "ladder": base, "break": scaling, "law": law, "forecasts": len(part),
                "usable": len(usable), "usable_rate": len(usable) / len(part),
                "usable_rate_2x": float((part.loc[part["ratio"] == 2, "forecast_status"] == "usable").mean()),
                "misses_usable": misses, "p_miss_usable": misses / len(usable) if len(usable) else np.nan,
                "cp_low": low, "cp_high": high,
                "coverage_2x": 1 - float(part.loc[part["ratio"] == 2, "miss"].mean()),
                "coverage_8x": 1 - float(part.loc[part["ratio"] == 8, "miss"].mean()),
            }
        )  # fmt: skip
    return pd.DataFrame(out)
