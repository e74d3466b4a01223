"""Stage: materialise the configured dataset in the local-collection format, one part per job.

python -m rerank_scaling.data.prepare_data --dataset '<json of config.dataset>' --out DIR --checks FILE.json
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --part corpus
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --part queries --split dev
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --part qrels --split dev \
    [--relevance-threshold 1] --checks checks/dev.json
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --check-splits --checks checks/splits.json
python -m rerank_scaling.data.prepare_data --merge-checks checks/*.json --checks checks.json

Without ``--part``, every part. The workflow runs one job per part (rules/data.smk), so that an edit
of one file of the collection re-runs only the jobs that read it. Bad data (malformed lines, a BOM,
bytes that are not UTF-8, empty queries, duplicate ids, empty splits, too many judgements of unknown
documents or queries, an evaluated split without a relevant judgement, ids with whitespace, a
relevant judgement of a document without text) stop the job naming file:line; the per-split counts
of the checks go to ``--checks``. ``--check-splits`` (once the queries of every split are
materialised) refuses a query in two splits (:mod:`.split_overlap`) and records how many each split
shares (``dataset.allow_split_overlap``); ``--merge-checks`` joins them into one ``checks.json``.
"""

from __future__ import annotations

import argparse
import json
import logging

from rerank_scaling.atomic import write_json
from rerank_scaling.data.datasets import PARTS, check_splits, prepare_dataset, prepare_part
from rerank_scaling.settings import parse_json_arg


def merged_checks(paths: list[str]) -> list[dict]:
    """The rows of the per-split checks files, each with its ``shared_queries`` from the splits
    check's file (those without rows)."""
    files = [json.loads(open(path).read()) for path in paths]
    shared = {
        split: n
        for found in files
        if "shared_queries" in found
        for split, n in found["shared_queries"].items()
    }
    rows = [row for found in files if "splits" in found for row in found["splits"]]
    return [{**row, "shared_queries": shared[row["split"]] if row["split"] in shared else 0} for row in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", help="JSON of the config's dataset section")
    parser.add_argument("--out", help="collection directory to write")
    parser.add_argument("--part", choices=PARTS, help="one part only (default: all)")
    parser.add_argument("--split", help="the split of --part queries or qrels")
    parser.add_argument(
        "--relevance-threshold",
        type=int,
        default=None,
        help="evaluated splits: evaluation.relevance_threshold",
    )
    parser.add_argument("--checks", default=None, help="JSON file for the data checks' counts per split")
    parser.add_argument(
        "--check-splits",
        action="store_true",
        help="the splits share no query (materialised queries in --out)",
    )
    parser.add_argument(
        "--merge-checks",
        nargs="+",
        help="the per-split checks files and the --check-splits one, into --checks",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.merge_checks:
        write_json(args.checks, {"splits": merged_checks(args.merge_checks)})
        return
    section = parse_json_arg(args.dataset)
    try:
        if args.check_splits:
            write_json(args.checks, {"shared_queries": check_splits(section, args.out)})
            return
        if args.part is None:
            rows = prepare_dataset(section, args.out, args.relevance_threshold)
        else:
            row = prepare_part(section, args.out, args.part, args.split, args.relevance_threshold)
            rows = [row] if row else []
    except ValueError as err:  # DataError, or a reader's file:line error
        raise SystemExit(f"prepare_data: {err}") from err
    if args.checks:
        write_json(args.checks, {"splits": rows})


if __name__ == "__main__":
    main()
