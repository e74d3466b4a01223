"""Stage: the training examples of one annotation source from the human ones (:mod:`.annotations`).

    python -m rerank_scaling.data.annotation_examples --source ict --seed 0 \
        --pointwise IN.parquet --groups IN.parquet --out DIR

Writes ``DIR/pointwise.parquet``, ``DIR/groups.parquet`` and ``DIR/provenance.json`` (the source,
how its queries were made, pairs kept and dropped). Fails, naming ``training.annotations``, when
no judged passage can be split.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pandas as pd

from rerank_scaling.atomic import write_json, write_table
from rerank_scaling.data.annotations import MIN_QUERY_WORDS, TooShortToSplit, ict_groups, ict_pointwise
from rerank_scaling.data.subsets import annotated_pairs

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, choices=["ict"])
    parser.add_argument("--seed", type=int, default=0, help="examples.seed")
    parser.add_argument("--pointwise", required=True)
    parser.add_argument("--groups", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        pointwise, pointwise_dropped = ict_pointwise(pd.read_parquet(args.pointwise), args.seed)
        groups, groups_dropped = ict_groups(pd.read_parquet(args.groups), args.seed)
    except TooShortToSplit as error:
        raise SystemExit(f"annotation_examples: {error}") from error
    out = Path(args.out)
    provenance = {
        "source": args.source,
        "method": "Inverse Cloze Task (Lee et al. 2019): a sentence of each human-judged relevant "
        f"passage (>= {MIN_QUERY_WORDS} words, seed {args.seed}) as the query, the passage without it "
        "as the positive, the human query's BM25 negatives",
        "from": [args.pointwise, args.groups],
        "pairs": {"pointwise": annotated_pairs(pointwise), "groups": annotated_pairs(groups)},
        "dropped_unsplittable": {"pointwise": pointwise_dropped, "groups": groups_dropped},
    }
    log.info("%s: %s", args.source, provenance["pairs"])
    write_table(pointwise, out / "pointwise.parquet")
    write_table(groups, out / "groups.parquet")
    write_json(out / "provenance.json", provenance)


if __name__ == "__main__":
    main()
