"""Stage: train one run and export its checkpoints (resumes after a kill).

    python -m rerank_scaling.training.train --run L2__listwise__full__s13 --config-json JSON \
        --pointwise P.parquet --groups G.parquet --corpus corpus.jsonl \
        --checkpoints DIR --work DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import logging

from rerank_scaling.data.collection import iter_corpus
from rerank_scaling.families.registry import family_of
from rerank_scaling.grid import RunSpec
from rerank_scaling.parent_process import die_with_parent
from rerank_scaling.settings import parse_json_arg, settings_from_dict
from rerank_scaling.training.train_settings import TrainSettings
from rerank_scaling.training.trainer import SaveFailed, TrainingStopped, train_run
from rerank_scaling.training.work_lock import WorkDirBusy, work_lock


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True)
    parser.add_argument("--model", required=True, help="JSON of the run's models[] entry")
    parser.add_argument("--training", required=True, help="JSON of the config's training section")
    parser.add_argument(
        "--memory", default="{}", help="JSON of the run's memory plan (rerank_scaling.planning.memory)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (the job's; overrides JSON)")
    parser.add_argument("--pointwise", required=True)
    parser.add_argument("--groups", required=True)
    parser.add_argument(
        "--corpus", required=True, help="corpus.jsonl (for a family that trains on it: scratch's tokenizer)"
    )
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = RunSpec.parse(args.run)
    model = parse_json_arg(args.model)
    settings = settings_from_dict(TrainSettings, parse_json_arg(args.training), "training")
    if args.threads:
        settings = dataclasses.replace(settings, threads=args.threads)
    die_with_parent()  # a killed job leaves no trainer behind (the rule's shell execs this process)
    texts = [text for _, text in iter_corpus(args.corpus)] if family_of(model).needs_corpus else None
    try:
        with work_lock(args.work):
            train_run(
                model,
                spec.objective,
                spec.attention,
                spec.seed,
                settings,
                args.pointwise,
                args.groups,
                args.checkpoints,
                args.work,
                device=args.device,
                corpus_texts=texts,
                memory=parse_json_arg(args.memory),
                data_fraction=spec.data_fraction,
                annotations=spec.annotations,
            )
    except (TrainingStopped, SaveFailed, WorkDirBusy) as stopped:
        raise SystemExit(f"train: {stopped}") from stopped


if __name__ == "__main__":
    main()
