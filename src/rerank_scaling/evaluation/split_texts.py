"""Stage: the texts of the documents one evaluation split's candidates name, written once.

    python -m rerank_scaling.evaluation.split_texts --corpus corpus.jsonl --run bm25/runs/dev.trec \
        --depth 100 --out eval/texts/dev.parquet

Every evaluation job reranks the BM25 top ``evaluation.rerank_depth`` of its splits. Reading their
texts from the corpus costs a scan of the whole ``corpus.jsonl`` per job and split (MS MARCO: 8.8M
lines, ~18 s of JSON parsing each, before the GPU does anything); this CPU job does the scan once
per split and writes a Parquet table (``docid``, ``text``) of only the candidates' documents, which
every evaluation job of the split reads in about a second (:func:`read_split_texts`;
``benchmarks/bench_eval_setup.py`` measures both).
"""

from __future__ import annotations

import argparse
import logging
import os

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.data.collection import load_texts
from rerank_scaling.data.trec import read_run, top_k

log = logging.getLogger(__name__)


def candidate_docids(run_file: str | os.PathLike[str], depth: int) -> set[str]:
    """Document ids among the top ``depth`` candidates of every query of a TREC run."""
    return {docid for docs in top_k(read_run(str(run_file)), depth).values() for docid in docs}


def split_texts(corpus: str | os.PathLike[str], run_file: str | os.PathLike[str], depth: int) -> pd.DataFrame:
    """(docid, text) of every document the run's top ``depth`` names; one that the corpus lacks raises."""
    wanted = candidate_docids(run_file, depth)
    texts = load_texts(corpus, wanted)
    missing = sorted(wanted - set(texts))
    if missing:
        raise ValueError(
            f"{run_file}: {len(missing)} candidate documents are not in {corpus} (e.g. {missing[:3]}); "
            "the BM25 run and the corpus come from different collections: re-run bm25_search"
        )
    ids = sorted(texts)
    return pd.DataFrame({"docid": ids, "text": [texts[d] for d in ids]})


def read_split_texts(path: str | os.PathLike[str], docids: set[str]) -> dict[str, str]:
    """The texts of ``docids`` from a :func:`split_texts` table; a missing one raises naming the file."""
    table = pd.read_parquet(path)
    texts = dict(zip(table["docid"], table["text"], strict=True))
    missing = sorted(docids - set(texts))
    if missing:
        raise ValueError(
            f"{path}: no text for {len(missing)} candidate documents (e.g. {missing[:3]}); it was written "
            "for another BM25 run or a smaller evaluation.rerank_depth: delete it and re-run the workflow"
        )
    return {docid: texts[docid] for docid in docids}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", required=True, help="corpus.jsonl")
    parser.add_argument("--run", required=True, help="the split's BM25 run (TREC)")
    parser.add_argument("--depth", type=int, required=True, help="evaluation.rerank_depth")
    parser.add_argument("--out", required=True, help="Parquet table (docid, text)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    table = split_texts(args.corpus, args.run, args.depth)
    write_table(table, args.out)
    log.info("%s: texts of %d candidate documents", args.out, len(table))


if __name__ == "__main__":
    main()
