"""Stage: BM25 with Lucene — build the index, or search one split's queries.

python -m rerank_scaling.data.bm25_retrieve index --corpus corpus.jsonl --index DIR --settings JSON
python -m rerank_scaling.data.bm25_retrieve search --index DIR --queries Q.tsv --run OUT --settings JSON
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rerank_scaling.data import bm25
from rerank_scaling.data.collection import read_queries
from rerank_scaling.settings import parse_json_arg, settings_from_dict


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index")
    index.add_argument("--corpus", required=True)
    index.add_argument("--index", required=True)
    search = sub.add_parser("search")
    search.add_argument("--index", required=True)
    search.add_argument("--queries", required=True)
    search.add_argument("--run", required=True)
    for command in (index, search):
        command.add_argument("--settings", required=True, help="JSON of the config's retrieval section")
        command.add_argument("--log", default=None)
    args = parser.parse_args(argv)
    settings = settings_from_dict(bm25.Bm25Settings, parse_json_arg(args.settings), "retrieval")
    log = Path(args.log) if args.log else None
    if args.command == "index":
        bm25.build_index(args.corpus, args.index, settings, log=log)
    else:
        bm25.search(args.index, read_queries(args.queries), args.run, settings, log=log)


if __name__ == "__main__":
    main()
