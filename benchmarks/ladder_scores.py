"""Honest scores of held-out ladder forecasts (benchmarks/bench_ladders.py): each distinct observation
once, scale-free interval scores at two levels, skill against two references, coverage with exact
binomial intervals, and confidence intervals from a bootstrap over fits (whole fits resampled).

The references:

* the seed paper's method ("Scaling Laws for Cross-Encoder Reranking": one power law, i.i.d. residual
  bootstrap) with its intervals clipped to the metric's range (:func:`clip_to_range`);
* a log-linear fit, value = a + b ln N (+ c ln D for a joint unit), by least squares, whose
  interval is the empirical quantiles of its own rolling-origin errors (:func:`log_linear_reference`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import stats

from rerank_scaling.laws.backtests import interval_score

#: The two interval levels scored: 95% (alpha = 0.05) and 80% (alpha = 0.2); their columns.
LEVELS = {0.95: ("low", "high"), 0.8: ("low_80", "high_80")}
#: One observation: the same measured run, held out by several units (a joint (N, D) unit and the
#: per-slice unit of the same ladder hold out the same run); its value is read from the same file.
OBSERVATION = ["ladder", "metric", "size", "observed"]
#: One fit: a slice of one unit of one ladder (``unit`` names the slice: an objective of the unit).
FIT = ["ladder", "kind", "metric", "unit"]


def clopper_pearson(inside: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) two-sided interval of a binomial proportion from k of n."""
    tail = (1 - confidence) / 2
    low = stats.beta.ppf(tail, inside, total - inside + 1) if inside else 0.0
    high = stats.beta.ppf(1 - tail, inside + 1, total - inside) if inside < total else 1.0
    return float(low), float(high)


def clip_to_range(points: pd.DataFrame, bounds: pd.Series) -> pd.DataFrame:
    """Intervals held to the metric's range (``bounds``: (low, high) per row): a value the metric
    cannot take is no possible outcome, so clipping can only improve a proper interval score."""
    lower = bounds.str[0].to_numpy(float)
    upper = bounds.str[1].to_numpy(float)
    clipped = points.copy()
    for column in ("low", "high", "low_80", "high_80"):
        if column in clipped:
            clipped[column] = np.clip(clipped[column].to_numpy(float), lower, upper)
    return clipped


def dedupe(points: pd.DataFrame, prefer: str = "model") -> pd.DataFrame:
    """One forecast per (method, observation): where a run is held out by units of several kinds,
    the ``prefer`` kind's forecast is kept (the per-slice law in N, the one the engine's ensemble
    makes; the joint additive law is shared by the engine and the seed paper)."""
    rank = (points["kind"] != prefer).astype(int)
    ordered = points.assign(_rank=rank).sort_values([*OBSERVATION, "_rank"], kind="stable")
    return ordered.drop_duplicates(["method", *OBSERVATION]).drop(columns="_rank").sort_index()


def scaled_scores(points: pd.DataFrame) -> pd.DataFrame:
    """Per point: interval scores (Gneiting & Raftery 2007 eq. 43) at each of :data:`LEVELS` and
    |error|, each divided by the slice's ``spread``; whether each interval covers the observation."""
    y = points["observed"].to_numpy(float)
    spread = points["spread"].to_numpy(float)
    out = {"|error| / spread": np.abs(points["forecast"].to_numpy(float) - y) / spread}
    for level, (low, high) in LEVELS.items():
        lo, hi = points[low].to_numpy(float), points[high].to_numpy(float)
        out[f"IS{level:.0%} / spread"] = interval_score(lo, hi, y, level) / spread
        out[f"covered {level:.0%}"] = (y >= lo) & (y <= hi)
    return pd.DataFrame(out, index=points.index)


def log_linear_reference(
    fit: pd.DataFrame, held: pd.DataFrame, bounds: tuple[float, float], joint: bool = False
) -> pd.DataFrame:
    """``held`` with the log-linear reference's forecast and its 95% and 80% intervals.

    value = a + b ln N (+ c ln D when ``joint``) by least squares on ``fit``. Rolling origins: for
    each fitted size s_j from the smallest that identifies the fit, refit on the sizes <= s_j and
    forecast every larger fitted size; an error e = y - yhat at horizon h = ln(N / s_j) is kept as
    e / h. The held-out interval is yhat + H q(e / h), H = ln(N / largest fitted size), q the
    empirical quantiles (Hyndman & Athanasopoulos, "Forecasting: Principles and Practice", 5.5,
    empirical prediction intervals from past forecast errors), held to ``bounds``; the point
    forecast is that predictive distribution's median, yhat + H median(e / h). NaN where no origin
    leaves an error."""

    def design(rows: pd.DataFrame) -> np.ndarray:
        columns = [np.ones(len(rows)), np.log(rows["size"].to_numpy(float))]
        if joint:
            columns.append(np.log(rows["tokens"].to_numpy(float)))
        return np.column_stack(columns)

    def predict(train: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray | None:
        x = design(train)
        if np.linalg.matrix_rank(x) < x.shape[1] or len(train) <= x.shape[1] - 1:
            return None
        coef, *_ = np.linalg.lstsq(x, train["value"].to_numpy(float), rcond=None)
        return design(rows) @ coef

    sizes = np.sort(fit["size"].unique())
    ratios = []
    for origin in sizes[:-1]:
        later = fit[fit["size"] > origin]
        guess = predict(fit[fit["size"] <= origin], later)
        if guess is not None:
            horizon = np.log(later["size"].to_numpy(float) / origin)
            ratios.extend((later["value"].to_numpy(float) - guess) / horizon)
    forecast = predict(fit, held)
    result = held.assign(forecast=np.nan, low=np.nan, high=np.nan, low_80=np.nan, high_80=np.nan)
    if forecast is None or not ratios:
        return result
    horizon = np.log(held["size"].to_numpy(float) / sizes[-1])
    result["forecast"] = np.clip(forecast + horizon * np.median(ratios), *bounds)
    for level, (low, high) in LEVELS.items():
        q = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
        result[low] = np.clip(forecast + horizon * q[0], *bounds)
        result[high] = np.clip(forecast + horizon * q[1], *bounds)
    return result


def fit_bootstrap(
    points: pd.DataFrame, statistic: Callable[[pd.DataFrame], pd.Series], draws: int, seed: int
) -> pd.DataFrame:
    """Percentile 95% intervals of ``statistic`` from resampling whole fits (:data:`FIT`) with
    replacement: the held-out points of one fit share its errors, so a fit is the resampled unit
    (Davison & Hinkley 1997, 3.8, the cluster bootstrap), never a point. Columns low, high."""
    groups = [part for _, part in points.groupby(FIT, sort=True)]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        chosen = rng.integers(0, len(groups), len(groups))
        values.append(statistic(pd.concat([groups[i] for i in chosen], ignore_index=True)))
    table = pd.DataFrame(values)
    return pd.DataFrame({"low": table.quantile(0.025), "high": table.quantile(0.975)})


def family(method: str) -> str:
    """The method's name without its law and uncertainty: engine, seed paper, log-linear."""
    return method.split(" (")[0]


def honest_points(points: pd.DataFrame) -> pd.DataFrame:
    """Every method's held-out points, the seed paper's intervals clipped to the metric's range,
    one forecast per (method, observation) (:func:`dedupe`), with :func:`scaled_scores` joined."""
    points = points.assign(method=points["method"].map(family))
    paper = points["method"] == "seed paper"
    points.loc[paper] = clip_to_range(points.loc[paper], points.loc[paper, "bounds"])
    kept = dedupe(points).reset_index(drop=True)
    return kept.join(scaled_scores(kept))


def coverage_text(covered: pd.Series) -> str:
    inside, total = int(covered.sum()), len(covered)
    low, high = clopper_pearson(inside, total)
    return f"{inside}/{total} = {inside / total:.2f} [{low:.2f}, {high:.2f}]"


def method_table(points: pd.DataFrame) -> pd.DataFrame:
    """Per method: points, medians of the scaled |error| and interval scores, coverage at both
    levels with exact 95% intervals."""
    rows = []
    for method, part in points.groupby("method", sort=False):
        part = part.dropna(subset=["forecast", "low", "high"])
        rows.append(
            {"method": method, "observations": len(part), "fits": part.groupby(FIT).ngroups}
            | {c: float(part[c].median()) for c in part if c.endswith("/ spread")}
            | {f"coverage {level:.0%}": coverage_text(part[f"covered {level:.0%}"]) for level in LEVELS}
        )
    return pd.DataFrame(rows)


def skill(points: pd.DataFrame, reference: str, level: float) -> float:
    """1 - median scaled interval score of the engine / the reference's, over the observations both
    forecast (Gneiting & Raftery 2007, skill score of a negatively oriented score)."""
    column = f"IS{level:.0%} / spread"
    wide = points.pivot_table(index=OBSERVATION, columns="method", values=column, aggfunc="first")
    both = wide[["engine", reference]].dropna()
    return float(1 - both["engine"].median() / both[reference].median())


REFERENCES = ("seed paper", "log-linear")


def headline(points: pd.DataFrame) -> pd.Series:
    """The statistics bootstrapped over fits: the engine's coverage at both levels and its skill at
    both levels against both references."""
    engine = points[points["method"] == "engine"]
    values = {
        f"engine coverage {level:.0%}": float(engine[f"covered {level:.0%}"].mean()) for level in LEVELS
    }
    for reference in REFERENCES:
        for level in LEVELS:
            values[f"skill vs {reference}, IS{level:.0%}"] = skill(points, reference, level)
    return pd.Series(values)


def scopes(points: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Pooled, each ladder alone, and every ladder but one (leave-one-ladder-out)."""
    ladders = sorted(points["ladder"].unique())
    return (
        {"pooled": points}
        | {ladder: points[points["ladder"] == ladder] for ladder in ladders}
        | {f"all but {ladder}": points[points["ladder"] != ladder] for ladder in ladders}
    )


def honest_section(points: pd.DataFrame, resamples: int, seed: int) -> list[str]:
    """The report's Markdown lines: per scope (:func:`scopes`) each method's :func:`method_table`
    and the engine's skill; the pooled headline with 95% intervals from :func:`fit_bootstrap`."""
    kept = honest_points(points)
    tables, skills = [], []
    for scope, part in scopes(kept).items():
        tables.append(method_table(part).assign(scope=scope))
        skills.append(headline(part).rename(scope))
    table = pd.concat(tables, ignore_index=True)
    table = table[["scope", *table.columns.drop("scope")]]
    pooled = headline(kept)
    bounds = fit_bootstrap(kept, headline, resamples, seed)
    lines = [f"- {name}: {value:.3f} [{bounds.loc[name, 'low']:.3f}, {bounds.loc[name, 'high']:.3f}]"
             for name, value in pooled.items()]  # fmt: skip
    engine = kept[kept["method"] == "engine"]
    duplicates = int(points["method"].str.startswith("engine").sum()) - len(engine)
    return [
        "## Honest scores: each observation once, scale-free, against two references",
        "",
        f"{engine['observed'].notna().sum()} distinct held-out observations from "
        f"{engine.groupby(FIT).ngroups} fits (the engine's); {duplicates} forecasts per method of an "
        "observation another unit also holds out were dropped: one forecast per (method, observation), the "
        "observation being (ladder, metric, size, observed value), the same measured run; where a "
        "joint (N, D) unit and a per-slice unit both hold it out, the per-slice forecast is kept "
        "(`ladder_scores.dedupe`). Spread: the range (max - min) of the slice's fitted values. "
        "IS: the interval score (Gneiting & Raftery 2007, eq. 43) of the central 95% (alpha = 0.05) "
        "and 80% (alpha = 0.2) intervals, lower is better. References: the seed paper's method "
        "(one power law, i.i.d. residual bootstrap) with its intervals clipped to the metric's range, "
        "and a log-linear fit whose intervals are the empirical quantiles of its rolling-origin "
        "errors per unit of log-size horizon (`ladder_scores.log_linear_reference`). Coverage: exact "
        "(Clopper-Pearson) 95% intervals, which treat observations as independent.",
        "",
        "### Pooled, with 95% intervals from a bootstrap over fits",
        "",
        f"Skill = 1 - median engine IS / median reference IS (positive: the engine is better); "
        f"{resamples} resamples of whole fits (`ladder_scores.fit_bootstrap`).",
        "",
        *lines,
        "",
        "### Per method, per ladder and leaving one ladder out",
        "",
        table.to_markdown(index=False, floatfmt=".4g"),
        "",
        "### The engine's skill, per ladder and leaving one ladder out",
        "",
        pd.DataFrame(skills).rename_axis("scope").reset_index().to_markdown(index=False, floatfmt=".3f"),
        "",
    ]
