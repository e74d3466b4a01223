"""Stage: materialise the configured dataset in the local-collection format.

python -m rerank_scaling.data.prepare_data --dataset '<json of config.dataset>' --out DIR --checks FILE.json

Bad data (malformed lines, duplicate ids, empty splits, too many judgements of unknown documents or
queries) stop the job naming file:line; the per-split counts of the checks go to ``--checks``.
"""

from __future__ import annotations

import argparse
import logging

from rerank_scaling.atomic import write_json
from rerank_scaling.data.datasets import prepare_dataset
from rerank_scaling.settings import parse_json_arg


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True, help="JSON of the config's dataset section")
    parser.add_argument("--out", required=True, help="collection directory to write")
    parser.add_argument("--checks", default=None, help="JSON file for the data checks' counts per split")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        checks = prepare_dataset(parse_json_arg(args.dataset), args.out)
    except ValueError as err:  # DataError, or a reader's file:line error
        raise SystemExit(f"prepare_data: {err}") from err
    if args.checks:
        write_json(args.checks, {"splits": checks})


if __name__ == "__main__":
    main()
