"""Stage: materialise the configured dataset in the local-collection format, one part per job.

python -m rerank_scaling.data.prepare_data --dataset '<json of config.dataset>' --out DIR --checks FILE.json
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --part corpus
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --part queries --split dev
python -m rerank_scaling.data.prepare_data --dataset JSON --out DIR --part qrels --split dev \
    [--relevance-threshold 1] --checks checks/dev.json
python -m rerank_scaling.data.prepare_data --merge-checks checks/*.json --checks checks.json

Without ``--part``, every part. The workflow runs one job per part (rules/data.smk), so that an edit
of one file of the collection re-runs only the jobs that read it. Bad data (malformed lines, a BOM,
bytes that are not UTF-8, empty queries, duplicate ids, empty splits, too many judgements of unknown
documents or queries, an evaluated split without a relevant judgement) stop the job naming
file:line; the per-split counts of the checks go to ``--checks``.
"""

from __future__ import annotations

import argparse
import json
import logging

from rerank_scaling.atomic import write_json
from rerank_scaling.data.datasets import PARTS, prepare_dataset, prepare_part
from rerank_scaling.settings import parse_json_arg


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
    parser.add_argument("--merge-checks", nargs="+", help="the per-split checks files to merge into --checks")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.merge_checks:
        rows = [row for path in args.merge_checks for row in json.loads(open(path).read())["splits"]]
        write_json(args.checks, {"splits": rows})
        return
    section = parse_json_arg(args.dataset)
    try:
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
