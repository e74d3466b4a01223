"""Stage: does a data fraction leave its runs the optimizer steps their checkpoints need?

    python -m rerank_scaling.data.fraction_check --fraction 0.25 --pointwise P.parquet \
        --groups G.parquet --training JSON --out CHECK.json

The config alone tells only with ``training.max_steps`` or builtin data (the workflow's checks); here the
examples tell, before any training job of the fraction starts. A fraction keeps ceil(f x n) whole
queries, which ones depending on the run's seed; the check is seed-free (adding a seed re-runs
nothing): it fails when even the f x n queries with the most rows give too few steps, naming the
fraction, the objective and the numbers; it passes, and the train job checks its own subset, when
only some draws could fall short.
"""

from __future__ import annotations

import argparse
import dataclasses

import pandas as pd

from rerank_scaling.atomic import write_json
from rerank_scaling.data.subsets import subset_size
from rerank_scaling.registries.objectives import StepSettings, examples_of, total_steps
from rerank_scaling.settings import parse_json_arg, settings_from_dict


def most_rows(frame: pd.DataFrame, fraction: float) -> int:
    """Rows of the ceil(fraction x queries) queries with the most rows: no seed's subset has more."""
    per_query = frame.groupby("qid").size().sort_values(ascending=False)
    return int(per_query.iloc[: subset_size(len(per_query), fraction)].sum())


def fraction_problems(fraction: float, frames: dict[str, pd.DataFrame], settings: StepSettings) -> list[str]:
    """Objectives whose every run on ``fraction`` has fewer steps than ``settings.checkpoints``."""
    problems = []
    for objective in settings.objectives:
        frame = frames[examples_of(objective)]
        _, batch = settings.batch(objective)
        steps = total_steps(settings, most_rows(frame, fraction), batch, fraction)
        if steps < settings.checkpoints:
            problems.append(
                f"config field 'training.data_fractions': fraction {fraction!r} gives {objective} runs at "
                f"most {steps} optimizer steps, fewer than the training.checkpoints = "
                f"{settings.checkpoints} each run keeps; raise the fraction, lower training.checkpoints "
                f"to at most {steps}, or raise training.epochs"
            )
    return problems


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fraction", type=float, required=True)
    parser.add_argument("--pointwise", required=True)
    parser.add_argument("--groups", required=True)
    parser.add_argument("--training", required=True, help="JSON: the training keys that set the steps")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    settings = settings_from_dict(StepSettings, parse_json_arg(args.training))
    frames = {"pointwise": pd.read_parquet(args.pointwise), "groups": pd.read_parquet(args.groups)}
    problems = fraction_problems(args.fraction, frames, settings)
    if problems:
        raise SystemExit("fraction_check: " + "; ".join(problems))
    write_json(args.out, {"fraction": args.fraction, "training": dataclasses.asdict(settings)})


if __name__ == "__main__":
    main()
