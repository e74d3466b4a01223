"""Stage (local rule, submitting node): download or check every model and dataset a config names.

    python -m rerank_scaling.data.prefetch --models JSON --dataset JSON --out manifest.tsv [--lock FILE]

Writes one row per item (kind, name, status, location); exits non-zero naming what is missing.
``--lock`` (``./run.sh --prefetch --pin``) also writes the commit each model resolved to
(:mod:`rerank_scaling.hub.pins`).
"""

from __future__ import annotations

import argparse
import logging
import sys

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.hub.cache import FetchRecord, missing_report, prefetch
from rerank_scaling.hub.pins import write_lock
from rerank_scaling.settings import parse_json_arg

COLUMNS = list(FetchRecord.__dataclass_fields__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", required=True, help="JSON of the config's models list")
    parser.add_argument("--dataset", required=True, help="JSON of the config's dataset section")
    parser.add_argument("--out", required=True, help="manifest (TSV) to write")
    parser.add_argument("--lock", default=None, help="also write the resolved commits here (--pin)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = {"models": parse_json_arg(args.models), "dataset": parse_json_arg(args.dataset)}
    records = prefetch(config)
    for record in records:
        print(f"{record.kind}\t{record.name}\t{record.status}\t{record.location}")
    error = missing_report(records)
    if error:
        sys.exit(error)
    write_table(pd.DataFrame([r.as_dict() for r in records], columns=COLUMNS), args.out)
    if args.lock:
        write_lock(records, args.lock)


if __name__ == "__main__":
    main()
