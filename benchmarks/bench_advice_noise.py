"""How much of the answer's "Next: train X" is Monte Carlo noise: the advise stage
(:mod:`rerank_scaling.forecast.advise_stage`) on one finished run's results, repeated with other
simulation seeds, at the command's outcome count and at the stage's.

    python benchmarks/bench_advice_noise.py results/default --seeds 6 \
        --out benchmarks/results/advice_noise.md

For each outcome count K and seed s (``fitting.seed`` = 1000 s: other outcome draws and other
refit resamples, the same runs; outcome k is refitted with seed + 1 + k, so seeds 1000 apart share
no refit) it reports the first-ranked candidate, its expected reduction of the
target's 95% width with the 95% Monte Carlo margin (:func:`rerank_scaling.forecast.advise.margin95`),
and the candidates the simulation could not tell from it (``tied_with_best``). A pick that changes
with the seed while the others are not tied would be advice the margin misstates; a pick that
changes inside the tied set is the noise the answer's sentence names. The last column counts the
answer's sentences (:func:`rerank_scaling.report.answer_advice.next_sentence`): "train X", "unknown"
(the best reduction within its margin of zero), "no candidate" (beyond it, below zero).
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import pandas as pd
import yaml
from benchmark_output import REPO, commit, emit

from rerank_scaling.forecast.advise import OUTCOMES
from rerank_scaling.forecast.advise_stage import STAGE_OUTCOMES, stage_advice
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.precision import cpu_name
from rerank_scaling.report.answer_advice import next_sentence
from rerank_scaling.settings import settings_from_dict

#: Simulation seeds this far apart share no refit seed (outcome k of seed s is refitted with s + 1 + k).
SEED_STEP = 1000


def one(job: tuple[Path, Path, int, int]) -> dict:
    """The stage's advice on ``results`` with ``outcomes`` and simulation seed ``seed``."""
    results, config, outcomes, seed = job
    sections = yaml.safe_load(config.read_text())
    settings = replace(settings_from_dict(FitSettings, sections["fitting"], "fitting"), seed=seed)
    split, objective = (settings.splits or ["dev"])[0], sections["training"]["objectives"][0]
    tables = [pd.read_parquet(results / name) for name in
              ("metrics/all.parquet", "laws/fits.parquet", "planning/plan.parquet")]  # fmt: skip
    started = time.process_time()
    advice = stage_advice(*tables, settings, split, objective, outcomes)
    best = advice.iloc[0]
    tied = advice.loc[advice["tied_with_best"] & (advice.index > 0), "candidate"]
    return {
        "outcomes": outcomes, "seed": seed, "first": best["candidate"],
        "reduction": best["expected_width_reduction"], "margin": best["reduction_margin"],
        "width_now": best["width_now"], "tied": ", ".join(tied) or "none",
        "told_apart": int((~advice["tied_with_best"]).sum()), "candidates": len(advice),
        "cpu_s": time.process_time() - started, "advice": advice,
    }  # fmt: skip


def report(rows: pd.DataFrame, results: Path, config: Path) -> list[str]:
    lines = [
        "# The answer's next run: how much is Monte Carlo noise",
        "",
        f"`python benchmarks/bench_advice_noise.py {results} --config {config} --seeds "
        f"{rows['seed'].nunique()}` at commit {commit()}, on {cpu_name()} ({os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f} at the end). The advise stage on that run's results "
        "(its headline forecast, the grid's candidates priced from its cost profiles), repeated with "
        f"other simulation seeds ({SEED_STEP} apart: no refit seed shared): other outcome draws and "
        "refit resamples, the same runs. K: simulated "
        f"outcomes per candidate ({OUTCOMES}: `rerank-scaling advise`'s default; {STAGE_OUTCOMES}: the "
        "stage's). Margin: the 95% Monte Carlo margin of the reduction (Student t). Tied: the "
        "candidates whose reduction per unit cost the simulation could not tell from the first's.",
        "",
        "| K | seed | first-ranked | width now | its reduction ± margin | tied with it | told apart "
        "| CPU s |",
        "|---:|---:|---|---:|---|---|---:|---:|",
    ]
    for r in rows.itertuples():
        lines.append(
            f"| {r.outcomes} | {r.seed} | {r.first} | {r.width_now:.3f} | {r.reduction:.3f} ± "
            f"{r.margin:.3f} | {r.tied} | {r.told_apart} of {r.candidates} | {r.cpu_s:.0f} |"
        )
    lines += ["", "| K | distinct first-ranked over seeds | a first-ranked outside another seed's tied set "
              "| the answer's sentence (train / unknown / none) |", "|---:|---|---:|---|"]  # fmt: skip
    for outcomes, part in rows.groupby("outcomes"):
        firsts = part["first"].unique()
        outside = sum(
            other["first"] != mine["first"] and other["first"] not in mine["tied"].split(", ")
            for _, mine in part.iterrows()
            for _, other in part.iterrows()
        )
        pairs = len(part) * (len(part) - 1)
        said = [next_sentence(advice).split(" ", 2)[1].rstrip(";") for advice in part["advice"]]
        kinds = f"{said.count('train')} / {said.count('unknown')} / {said.count('no')}"
        lines.append(
            f"| {outcomes} | {len(firsts)} ({', '.join(firsts)}) | {outside} of {pairs} pairs | {kinds} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a finished run's results folder (results/default)")
    parser.add_argument("--config", type=Path, default=REPO / "config.yaml", help="its config file")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()
    seeds = [SEED_STEP * s for s in range(args.seeds)]
    jobs = [(args.results, args.config, k, s) for k in (OUTCOMES, STAGE_OUTCOMES) for s in seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = pd.DataFrame(list(pool.map(one, jobs)))
    emit("\n".join(report(rows, args.results, args.config)), args.out)


if __name__ == "__main__":
    main()
