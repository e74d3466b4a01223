"""Stage: training examples for every objective from the train split and its BM25 run.

    python -m rerank_scaling.data.build_examples --collection DIR --split train --run RUN \
        --settings JSON --pointwise OUT.parquet --groups OUT.parquet [--training JSON] [--counts OUT.json]

Fails, naming the config field, when an objective gets no examples (e.g. binary 0/1 qrels with
``examples.positive_threshold: 2``), or when ``--training`` (the training keys that set the number
of optimizer steps) asks for more checkpoints than the examples give steps. ``--counts``: how many
training queries give examples (``training_examples.example_counts``), with a warning when more
than ``training_examples.THIN_SHARE`` give none, which the summary and the answer page show.
"""

from __future__ import annotations

import argparse
import logging

from rerank_scaling.atomic import write_json, write_table
from rerank_scaling.data.collection import CollectionDir, load_texts, read_split
from rerank_scaling.data.training_examples import (
    ExampleSettings,
    example_counts,
    group_examples,
    needed_docids,
    negative_pools,
    no_examples_reason,
    pointwise_examples,
    select_examples,
)
from rerank_scaling.data.trec import iter_run_queries
from rerank_scaling.registries.objectives import (
    OBJECTIVES,
    StepSettings,
    examples_of,
    negatives_key,
    training_steps_problems,
)
from rerank_scaling.settings import parse_json_arg, settings_from_dict

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--collection", required=True)
    parser.add_argument("--split", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--settings", required=True, help="JSON of the config's examples section")
    parser.add_argument("--pointwise", required=True)
    parser.add_argument("--groups", required=True)
    parser.add_argument("--training", default=None, help="JSON: objectives, checkpoints and step keys")
    parser.add_argument("--counts", default=None, help="JSON: queries giving examples, warnings")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = settings_from_dict(ExampleSettings, parse_json_arg(args.settings), "examples")
    queries, qrels = read_split(args.collection, args.split)
    pools = negative_pools(iter_run_queries(args.run), qrels, settings)  # streamed: no 20M-line dict
    selected = select_examples(queries, qrels, pools, settings)
    texts = load_texts(CollectionDir(args.collection).corpus, needed_docids(selected))
    pointwise = pointwise_examples(selected, queries, texts, settings)
    groups = group_examples(selected, queries, texts, settings)
    log.info("%d queries -> %d pointwise pairs, %d groups", len(selected), len(pointwise), len(groups))
    training = parse_json_arg(args.training) if args.training else {"objectives": list(OBJECTIVES)}
    frames = {"pointwise": pointwise, "groups": groups}
    rows = {o: len(frames[examples_of(o)]) for o in training["objectives"]}
    for objective, count in rows.items():
        if count == 0:
            reason = no_examples_reason(qrels, selected, settings, objective, negatives_key(objective))
            raise SystemExit(f"build_examples: {reason}")
    if "checkpoints" in training:
        problems = training_steps_problems(settings_from_dict(StepSettings, training), rows, exact=True)
        if problems:
            raise SystemExit("build_examples: " + "; ".join(problems))
    if args.counts:
        trained = {examples_of(o) for o in training["objectives"]}
        kinds = {kind: frame for kind, frame in frames.items() if kind in trained}
        counts = example_counts(queries, qrels, selected, kinds, settings)
        for warning in counts["warnings"]:
            log.warning("%s", warning)
        write_json(args.counts, counts)
    write_table(pointwise, args.pointwise)
    write_table(groups, args.groups)


if __name__ == "__main__":
    main()
