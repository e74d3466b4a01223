"""Evaluation batch size per CPU kind: pairs per second of the evaluation's scoring at each batch
size, per default model size, measured in one run with interleaved repeats.

    python benchmarks/bench_eval_batch.py --out benchmarks/results/eval_batch_amx.md
    python benchmarks/bench_eval_batch.py --batch-sizes 16 64 --beside-training L6  # as in the DAG

The workload is the default's evaluation of one checkpoint: the dev split's queries of config.yaml's
builtin collection, ``evaluation.rerank_depth`` passages each (drawn at random: at the default's
``training.max_length`` nearly every pair is truncated, so the length distribution is the
candidates' own), tokenized and length-sorted as the evaluation tokenizes them
(:func:`rerank_scaling.evaluation.rerank.tokenize_pairs`), one thread (``evaluation.threads``).
Each repeat times, in a shuffled order, for every size and batch size: the bf16 pass (the weights
cast to bf16 once, :func:`rerank_scaling.precision.to_bf16_weights`) and the fp32 pass
(:func:`rerank_scaling.evaluation.rerank.model_scores`), the two the near-tie rescoring combines
(its fp32 share does not depend on the batch size: its calibration sample is
:data:`rerank_scaling.evaluation.near_ties.CALIBRATION_PAIRS` pairs whatever the batch). The stage's
time per checkpoint is the bf16 pass plus ``--rescored`` (the share of pairs rescored in fp32)
times the fp32 pass. On a CPU without bf16 units (``evaluation.precision: auto`` resolves to fp32
there, :func:`rerank_scaling.precision.resolve_precision`) the evaluation scores every pair once in
fp32 (through the fused encoder where the kind's profile says so) and there is no bf16 pass to
time: the stage's time per checkpoint is the fp32 pass. The table gives the medians (min-max) and,
per size, each batch size's
throughput relative to ``--reference``; the batch size with the best geometric mean of those
ratios over the sizes is the one :mod:`rerank_scaling.compute.cpu_profiles` records for the kind
(:attr:`~rerank_scaling.compute.cpu_profiles.CpuProfile.eval_batch_size`, what
``evaluation.batch_size: auto`` scores in there): 64 on every kind measured but the AMD Zen 3.
"""

from __future__ import annotations

import argparse
import copy
import functools
import multiprocessing
import os
import random
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from benchmark_output import emit
from interleaved import interleaved_times

from rerank_scaling.compute.cpu_profiles import cpu_kind
from rerank_scaling.data.ict import IctSettings, build_ict_collection
from rerank_scaling.evaluation.rerank import model_scores, tokenize_pairs
from rerank_scaling.families.models import build_cross_encoder, freeze_input_embeddings
from rerank_scaling.precision import cpu_name, resolve_precision, to_bf16_weights

CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"


def training_load(spec: dict, config: dict, ready, stop, steps) -> None:
    """What a training job beside the evaluation does, until ``stop`` is set: pointwise steps of
    ``spec`` (forward, BCE loss, backward, AdamW) at the default's batch and length in fp32, one
    thread, the embeddings frozen as ``training.freeze_embeddings`` says. Random token ids: the
    arithmetic of a step does not depend on them. In the DAG an evaluation job shares the machine
    with such a job (or another evaluation) most of the time, which a quiet benchmark does not.
    ``steps`` (a shared counter) counts the steps taken, so the report shows the load ran."""
    torch.set_num_threads(config["training"]["threads"])
    training = config["training"]
    model = build_cross_encoder(spec, training["max_length"], 0).train()
    if training["freeze_embeddings"]:  # as the trainer freezes them
        freeze_input_embeddings(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=training["lr"])
    shape = (training["pointwise_batch_size"], training["max_length"])
    ids = torch.randint(1000, model.model.config.vocab_size, shape)
    features = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    features["token_type_ids"] = torch.zeros_like(ids)
    labels = torch.randint(0, 2, (shape[0],)).float()
    ready.set()
    while not stop.is_set():
        logits = model(features)["scores"].view(shape[0], -1)[:, 0]
        torch.nn.functional.binary_cross_entropy_with_logits(logits, labels).backward()
        optimizer.step()
        optimizer.zero_grad()
        steps.value += 1


def workload(config: dict, seed: int = 0):
    """(tokenizer-ready pairs, query texts, passage texts) of the default's dev split."""
    builtin = config["dataset"]["builtin"]
    settings = IctSettings.of(**{k: v for k, v in builtin.items() if k in IctSettings.__dataclass_fields__})
    docs, queries, _ = build_ict_collection(settings)
    texts, dev = dict(docs), queries["dev"]
    rng = random.Random(seed)
    docids = sorted(texts)
    depth = config["evaluation"]["rerank_depth"]
    pairs = [(qid, docid) for qid in sorted(dev) for docid in rng.sample(docids, depth)]
    return pairs, dev, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    parser.add_argument("--reference", type=int, default=64, help="the batch size ratios are to")
    parser.add_argument("--sizes", nargs="+", default=["L1", "L2", "L4", "L6"], help="config.yaml's models")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rescored", type=float, default=0.226, help="share of pairs rescored in fp32")
    parser.add_argument(
        "--beside-training",
        metavar="SIZE",
        help="time every pass while a process trains config.yaml's model SIZE (training_load)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    config = yaml.safe_load(CONFIG.read_text())
    beside = None
    if args.beside_training:
        (spec,) = [m for m in config["models"] if m["name"] == args.beside_training]
        context = multiprocessing.get_context("spawn")
        ready, stop, steps = context.Event(), context.Event(), context.Value("q", 0)
        beside = context.Process(target=training_load, args=(spec, config, ready, stop, steps), daemon=True)
        beside.start()
        if not ready.wait(300):
            raise SystemExit(f"the training load ({args.beside_training}) did not start within 300 s")
        loaded_at = time.monotonic()
    torch.set_num_threads(config["evaluation"]["threads"])
    max_length = config["training"]["max_length"]
    pairs, queries, texts = workload(config)
    passes = ("bf16", "fp32") if resolve_precision("auto", "cpu") == "bf16" else ("fp32",)
    rescored = args.rescored if "bf16" in passes else 1.0  # without bf16 units: every pair in fp32
    specs = {m["name"]: m for m in config["models"] if m["name"] in args.sizes}
    models, tokens = {}, None
    for name, spec in specs.items():
        fp32 = build_cross_encoder(spec, max_length, 0).eval()
        low = to_bf16_weights(copy.deepcopy(fp32)) if "bf16" in passes else None  # as the evaluation casts it
        models[name] = (fp32, low)
        if tokens is None:
            tokens = tokenize_pairs(fp32.tokenizer, pairs, queries, texts, max_length)
            pad = fp32.tokenizer.pad_token_id or 0
    cells = {
        (n, b, p): functools.partial(model_scores, models[n][p == "bf16"], tokens, b, pad, "cpu")
        for n in specs
        for b in args.batch_sizes
        for p in passes
    }  # the warm-up round: one-off allocations and kernel selection
    seconds = interleaved_times(cells, args.repeats, shuffle=1)
    load = os.getloadavg()[0]
    if beside is not None:
        load_rate = steps.value / (time.monotonic() - loaded_at)
        stop.set()
        beside.join(60)
        if beside.exitcode != 0:
            raise SystemExit(f"the training load exited with {beside.exitcode} before the timings ended")
    median = {cell: statistics.median(values) for cell, values in seconds.items()}
    per_pair = {  # seconds per pair of one checkpoint's evaluation: bf16, plus the rescored share in fp32
        (n, b): (median.get((n, b, "bf16"), 0.0) + rescored * median[(n, b, "fp32")]) / len(pairs)
        for n in specs
        for b in args.batch_sizes
    }
    lines = [
        "# Evaluation batch size on this CPU",
        "",
        f"`python benchmarks/bench_eval_batch.py` on {cpu_name()} (kind `{cpu_kind()}`), "
        f"{os.cpu_count()} CPUs, 1 thread, torch {torch.__version__}; {len(pairs)} pairs (the default's dev "
        f"split: {len(queries)} queries x {config['evaluation']['rerank_depth']}), max length {max_length}; "
        f"{args.repeats} interleaved repeats; load average at the end {load:.2f}"
        + (
            f"; every pass timed while another process trained {args.beside_training} (pointwise steps, "
            f"{config['training']['threads']} thread, `training_load`: {load_rate:.2f} steps/s throughout)"
            if beside is not None
            else ""
        )
        + ". Seconds per pass: median "
        "(min-max); per checkpoint: "
        + (
            f"bf16 + {rescored:g} x fp32 (the near-tie rescoring's share)."
            if "bf16" in passes
            else "the fp32 pass (no bf16 units: `precision: auto` scores every pair in fp32)."
        ),
        "",
        "| size | batch | "
        + " | ".join(f"{p} pass s" for p in passes)
        + f" | pairs/s per checkpoint | vs batch {args.reference} |",
        "|---|---:|" + "---|" * len(passes) + "---:|---:|",
    ]
    ratios: dict[int, list[float]] = {b: [] for b in args.batch_sizes}
    for name in specs:
        for batch in args.batch_sizes:
            ratio = per_pair[(name, args.reference)] / per_pair[(name, batch)]
            ratios[batch].append(ratio)
            spans = []
            for precision in passes:
                values = seconds[(name, batch, precision)]
                spans.append(f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
            rate = 1 / per_pair[(name, batch)]
            lines.append(f"| {name} | {batch} | {' | '.join(spans)} | {rate:.0f} | {ratio:.2f}x |")
    means = {b: float(np.exp(np.mean(np.log(r)))) for b, r in ratios.items()}
    best = max(means, key=means.get)
    lines += [
        "",
        "Geometric mean over the sizes of the throughput relative to batch "
        f"{args.reference}: " + ", ".join(f"{b}: {m:.3f}x" for b, m in means.items()) + ".",
        "",
        f"**Best on this CPU kind (`{cpu_kind()}`): batch {best}** "
        f"({means[best]:.3f}x batch {args.reference}).",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
