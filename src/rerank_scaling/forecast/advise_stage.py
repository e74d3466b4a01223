"""Stage: which run to train next, for the answer page's "What to run next"
(:mod:`rerank_scaling.report.answer_advice`).

    python -m rerank_scaling.forecast.advise_stage --metrics all.parquet --fits laws/fits.parquet \
        --plan planning/plan.parquet --fitting JSON --split dev --objective pointwise \
        --out planning/advice.csv

The forecast it makes surer is the answer's headline: the first of ``fitting.metrics`` on the first
fitted split, for ``--objective`` (the first configured; the first attention variant), at the
largest held-out size. The runs so far are the fitted sizes' final checkpoints (the fit stage's
model protocol), fitted with the fit stage's settings and reranking ceiling (``laws/fits.parquet``'s
``ceiling``). Candidates: the grid's own (:func:`.advise_table.default_candidates`: every fitted size
again, the geometric midpoints between them and to the target), priced in device-hours from the
measured cost profiles (``planning/plan.parquet``'s ``profile`` rows: seconds per training example,
a power law in N through them, :class:`rerank_scaling.planning.cost_model.PowerLaw`) times the
fitted runs' training examples. Writes ``advice.csv`` (:data:`.advise_table.ADVICE_COLUMNS`, then
``metric, split, objective, target, target_size, cost_unit``); no rows when there is no held-out size.

It simulates :data:`STAGE_OUTCOMES` outcomes per candidate, four times the command's default: at
4 the answer's first-ranked run changed with the seed on the default's runs, and each row's
Monte Carlo margin is what the answer's sentence reports (``benchmarks/bench_advice_noise.py``).
``--workers`` (the rule's threads) simulates the candidates side by side.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.forecast.advise import OUTCOMES, Candidate, Group, advise
from rerank_scaling.forecast.advise_table import ADVICE_COLUMNS, default_candidates, one_group
from rerank_scaling.laws.fit_settings import GROUP_KEYS, FitSettings
from rerank_scaling.planning.cost_model import PowerLaw
from rerank_scaling.registries.size_axes import size_column
from rerank_scaling.settings import parse_json_arg, settings_from_dict

log = logging.getLogger(__name__)
COST_UNIT = "device-hours"
#: Simulated outcomes per candidate for the answer (each one refit of the ensemble per candidate).
STAGE_OUTCOMES = 4 * OUTCOMES


def headline_rows(metrics: pd.DataFrame, metric: str, split: str, objective: str) -> pd.DataFrame:
    """The trained runs of the headline group: ``metric``/``split``/``objective`` and the first
    value of every other group key (the first attention variant, family, annotation source)."""
    rows = metrics[
        metrics["role"].isin(["fit", "held_out"])
        & (metrics["metric"] == metric)
        & (metrics["split"] == split)
        & (metrics["objective"] == objective)
    ]
    for key in GROUP_KEYS:
        if key in rows.columns and rows[key].nunique() > 1:
            rows = rows[rows[key] == rows[key].iloc[0]]
    return rows


def priced(candidates: list[Candidate], plan: pd.DataFrame, examples: float) -> list[Candidate]:
    """Each candidate's device-hours: seconds per training example (a power law in N through the
    measured profiles) x ``examples`` / 3600."""
    profiles = plan[plan["kind"] == "profile"].dropna(subset=["size", "train_seconds_per_example"])
    if profiles.empty:
        raise ValueError("planning/plan.parquet has no cost profile rows; run the plan stage first")
    seconds = PowerLaw.through(profiles["size"], profiles["train_seconds_per_example"])
    return [replace(c, cost=float(seconds(c.size)) * examples / 3600) for c in candidates]


@dataclass(frozen=True)
class Headline:
    """The headline forecast's fitted group and its target: the largest held-out size."""

    group: Group
    target_size: float
    target: str


def headline_group(
    metrics: pd.DataFrame, fits: pd.DataFrame, settings: FitSettings, split: str, objective: str
) -> Headline | None:
    """The headline forecast's points as the fit stage fits them (its settings and reranking
    ceiling) and its target; None without a held-out size or with fewer than two fitted sizes."""
    metric = settings.metrics[0]
    rows = headline_rows(metrics, metric, split, objective)
    held = rows[rows["role"] == "held_out"]
    if held.empty or rows.loc[rows["role"] == "fit", "model"].nunique() < 2:
        return None
    fitted = one_group(rows, settings, "metrics/all.parquet")  # sizes on fitting.size_axis
    group = Group(
        metric, fitted.fit_rows, settings, fitted.spread, ceiling_of(fits, metric, split, objective)
    )
    sizes = held[size_column(settings.size_axis)]
    return Headline(group, float(sizes.max()), str(held.loc[sizes.idxmax(), "model"]))


def stage_advice(
    metrics: pd.DataFrame,
    fits: pd.DataFrame,
    plan: pd.DataFrame,
    settings: FitSettings,
    split: str,
    objective: str,
    outcomes: int = STAGE_OUTCOMES,
    workers: int = 1,
) -> pd.DataFrame:
    """advice.csv's rows (module docstring), ``outcomes`` simulated per candidate in ``workers``
    processes."""
    none = pd.DataFrame(columns=[*ADVICE_COLUMNS, "metric", "split", "objective", "target", "target_size"])
    headline = headline_group(metrics, fits, settings, split, objective)
    if headline is None:
        log.info("no advice: no held-out size, or fewer than two fitted sizes")
        return none
    group = headline.group
    examples = float(group.fit_rows.groupby("model")["examples"].max().median())  # a run's whole training
    candidates = priced(default_candidates(group, headline.target_size), plan, examples)
    try:
        advice = advise(group, headline.target_size, candidates, outcomes, settings.seed, workers=workers)
    except ValueError as error:  # no law form forecasts the target from these sizes
        log.info("no advice: %s", error)
        return none
    return advice[ADVICE_COLUMNS].assign(
        metric=group.metric, split=split, objective=objective, target=headline.target,
        target_size=headline.target_size, cost_unit=COST_UNIT,
    )  # fmt: skip


def ceiling_of(fits: pd.DataFrame, metric: str, split: str, objective: str) -> float | None:
    """The reranking ceiling the fit stage fitted the group's ensemble under (None: the bound)."""
    if "ceiling" not in fits.columns:
        return None
    found = fits[(fits["metric"] == metric) & (fits["split"] == split) & (fits["objective"] == objective)]
    values = found["ceiling"].dropna()
    return float(values.iloc[0]) if len(values) else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--fits", required=True, help="laws/fits.parquet (the ceiling)")
    parser.add_argument("--plan", required=True, help="planning/plan.parquet (cost profiles)")
    parser.add_argument("--fitting", required=True, help="JSON of the config's fitting section")
    parser.add_argument("--split", required=True)
    parser.add_argument("--objective", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=1, help="processes the simulation runs in")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = settings_from_dict(FitSettings, parse_json_arg(args.fitting), "fitting")
    metrics, fits, plan = (pd.read_parquet(p) for p in (args.metrics, args.fits, args.plan))
    advice = stage_advice(metrics, fits, plan, settings, args.split, args.objective, workers=args.workers)
    write_text(args.out, advice.to_csv(index=False))
    log.info("wrote %s (%d candidates)", args.out, len(advice))


if __name__ == "__main__":
    main()
