"""BM25 indexing and search throughput on this CPU: the rates behind the ``bm25_index`` and
``bm25_search`` jobs' time and memory limits (:mod:`rerank_scaling.workflow.job_resources`).

    python benchmarks/bench_bm25.py --docs 200000 --queries 2000 \
        --out benchmarks/results/bm25_cpu.md

A synthetic corpus of ``--docs`` passages of 40-80 words (MS MARCO passages average ~56) drawn from
a Zipf(1) vocabulary of 50k content words (natural text's word frequencies after the analyzer drops
the ~100 most frequent words, the stopwords, so posting lists have the long tail of a real index),
and ``--queries`` queries of 4 words from the same distribution (MS MARCO's queries have ~6 words,
~3.5 of them after stopwords; drawn by frequency, their posting lists are longer than real
queries': an upper bound). It runs the stage's own code
(:func:`rerank_scaling.data.bm25.build_index`, :func:`rerank_scaling.data.bm25.search`) on one
Lucene thread and times, separately, the Python passes over the corpus that the index job makes
besides Lucene (the copy into ``retrieval.threads`` shards, the indexed-count check), so that
``index seconds = docs x (python + lucene / threads)``. Search time per query is counted per
million documents (a posting list grows with the collection). The index's bytes per document size
the search job's memory (its pages are mapped into the process).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from benchmark_output import emit

from rerank_scaling.data import bm25
from rerank_scaling.data.collection import iter_corpus_lines
from rerank_scaling.precision import cpu_name

VOCABULARY = 50000
#: The most frequent ranks of a Zipf vocabulary are stopwords, which Lucene's English analyzer drops:
#: content words start at this rank (so no synthetic term has a posting in every other passage).
STOPWORD_RANKS = 100
QUERY_WORDS = 4


def zipf_sampler(seed: int):
    """Words w0..w49999 with probability ~ 1/rank, ranks counted after the stopwords."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(VOCABULARY)]
    cumulative = list(itertools.accumulate(1.0 / (rank + STOPWORD_RANKS) for rank in range(VOCABULARY)))

    def draw(k: int) -> str:
        return " ".join(rng.choices(words, cum_weights=cumulative, k=k))

    return rng, draw


def write_corpus(path: Path, docs: int, seed: int = 0) -> None:
    rng, draw = zipf_sampler(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(docs):
            handle.write(json.dumps({"id": f"d{i}", "contents": draw(rng.randint(40, 80))}) + "\n")


class Clock:
    """Wall and CPU seconds of a block: the CPU time of this process and of the children (the JVMs)
    that finished in it. On a machine shared with other jobs the wall time grows with the load;
    the CPU time is the work, what a job gets on its own cores."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, self._cpu() - self.cpu

    @staticmethod
    def _cpu() -> float:
        mine, children = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def peak_child_rss_mb() -> float:
    """Largest resident set of any finished child process (the JVMs), MB."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=200000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--memory-mb", type=int, default=2048, help="the JVM heap (retrieval.memory_mb)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    settings = dataclasses.replace(bm25.ANSERINI_DEFAULTS, threads=1, memory_mb=args.memory_mb)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus.jsonl"
        write_corpus(corpus, args.docs)
        corpus_bytes = corpus.stat().st_size

        shards = root / "shards"
        shards.mkdir()
        with Clock() as shard:
            bm25.shard_corpus(corpus, shards, 2)
        shutil.rmtree(shards)
        with Clock() as check:
            counted = sum(1 for _, _, text in iter_corpus_lines(corpus) if text.strip())
        assert counted == args.docs

        index = root / "index"
        with Clock() as indexing:
            bm25.build_index(corpus, index, settings, log=root / "index.log")
        index_rss = peak_child_rss_mb()
        index_bytes = sum(f.stat().st_size for f in index.rglob("*") if f.is_file())

        rng, draw = zipf_sampler(1)
        queries = {f"q{j}": draw(QUERY_WORDS) for j in range(args.queries)}
        with Clock() as start:  # one query: the JVM's start and the index's opening
            bm25.search(index, dict(itertools.islice(queries.items(), 1)), root / "one.trec", settings)
        with Clock() as searching:
            bm25.search(index, queries, root / "run.trec", settings, log=root / "search.log")
        search_rss = peak_child_rss_mb()

    # build_index on one thread: a symlink, Lucene, the count check; CPU seconds (class Clock)
    lucene = indexing.cpu - check.cpu - start.cpu
    rates = {
        "jvm_start_seconds": start.cpu,
        "python_seconds_per_doc": (shard.cpu + check.cpu) / args.docs,
        "lucene_thread_seconds_per_doc": lucene / args.docs,
        "search_thread_seconds_per_query_per_million_docs": (searching.cpu - start.cpu)
        / (args.queries - 1)
        / (args.docs / 1e6),
        "index_bytes_per_doc": index_bytes / args.docs,
        "corpus_bytes_per_doc": corpus_bytes / args.docs,
    }
    load = os.getloadavg()
    lines = [
        "# BM25 throughput on CPU (`benchmarks/bench_bm25.py`)",
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, load average {load[0]:.1f} at the end "
        f"(shared with other jobs: wall times grow with it), Python {platform.python_version()}. "
        f"Synthetic corpus: {args.docs:,} passages of 40-80 Zipf(1) content words "
        f"({corpus_bytes / 1e6:.0f} MB), "
        f"{args.queries:,} queries of {QUERY_WORDS} words, depth {settings.depth}, JVM heap "
        f"{settings.memory_mb} MB, one Lucene thread.",
        "",
        "The rates are CPU seconds (this process's and its JVMs', the JVM's garbage-collector and"
        " compiler threads included: an upper bound of one Lucene thread's work), which the load of"
        " other jobs does not inflate; wall seconds are shown for reference.",
        "",
        "| measurement | CPU s | wall s |",
        "|---|---:|---:|",
        f"| Python passes over the corpus: shard copy | {shard.cpu:.1f} | {shard.wall:.1f} |",
        f"| Python passes over the corpus: indexed-count check | {check.cpu:.1f} | {check.wall:.1f} |",
        f"| index job, one thread (`build_index`) | {indexing.cpu:.1f} | {indexing.wall:.1f} |",
        f"| of which Lucene after the JVM's start ({args.docs / lucene:,.0f} docs per CPU s) "
        f"| {lucene:.1f} | |",
        f"| search of one query (the JVM's start) | {start.cpu:.1f} | {start.wall:.1f} |",
        f"| search of all queries, one thread (`search`; "
        f"{(args.queries - 1) / (searching.cpu - start.cpu):,.0f} queries per CPU s after the start) | "
        f"{searching.cpu:.1f} | {searching.wall:.1f} |",
        "",
        f"Index size {index_bytes / 1e6:.1f} MB ({rates['index_bytes_per_doc']:.0f} bytes/doc); peak JVM "
        f"resident set {index_rss:.0f} MB while indexing, {search_rss:.0f} MB at most over both (heap "
        f"{settings.memory_mb} MB).",
        "",
        "Rates (`rerank_scaling.workflow.job_resources.BM25_RATES` holds these, "
        "to three significant digits):",
        "",
        "```json",
        json.dumps({key: float(f"{value:.3g}") for key, value in rates.items()}, indent=2),
        "```",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
