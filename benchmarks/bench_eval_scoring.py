"""A checkpoint's bf16 evaluation scoring before and after the fused encoder and the rounds rule, on
a run's own checkpoints, in one run with interleaved repeats.

    python benchmarks/bench_eval_scoring.py results/default --out benchmarks/results/eval_scoring_amx.md

*Before* (main at 6bf2156, whose scoring is that of c896352, the code when the compiled-CPU issue
was filed: the files' changes between are refactors): the eager bf16 pass (the weights cast to bf16
once), then the one-round near-tie rule of that commit -- every candidate whose bf16 score lies
within 2e of one of another grade rescored in fp32 by the eager forward, both ends of every such
pair (:func:`one_round_rescoring`, kept here as the baseline), with that commit's safety factor
(:data:`~rerank_scaling.evaluation.near_ties.SAFETY_FACTOR`, 3 on every CPU). *After*: the
evaluation's own path: the bf16 pass through the fused oneDNN encoder
(:mod:`rerank_scaling.compute.fused_encoder`, with the compiled kernels where the extension is built),
then the rounds rule (:func:`rerank_scaling.evaluation.near_ties.rescore_near_ties`) with the CPU
kind's safety factor, its fp32 rescoring by the forward the kind's profile names
(``CpuProfile.fused_fp32``). Both take the same calibration sample
(:data:`~rerank_scaling.evaluation.near_ties.CALIBRATION_PAIRS` pairs) and score the dev split as
the workflow does (its split texts, BM25 top ``evaluation.rerank_depth``, grades from its qrels,
``evaluation.batch_size``, one thread); the grade orders are checked against the eager fp32 pass.

Per final checkpoint of ``results`` (one per run): the seconds of each (the model's cast and both
precisions' passes; not its loading, the same for both), medians (min-max) over interleaved
repeats in a shuffled order; the pairs each scored in fp32; and a check that each orders every two
candidates of different grades as a full fp32 pass does (the rank metrics' guarantee).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from bench_eval_precision import final_checkpoints
from benchmark_output import emit
from interleaved import interleaved_times, span

from rerank_scaling.compute.cpu_profiles import cpu_kind, cpu_profile, eval_batch_size
from rerank_scaling.compute.fused_encoder import encoder_kernels
from rerank_scaling.evaluation.checkpoints import load_split
from rerank_scaling.evaluation.near_ties import (
    CALIBRATION_PAIRS,
    SAFETY_FACTOR,
    calibration_sample,
    pairs_by_query,
    rescore_near_ties,
)
from rerank_scaling.evaluation.rerank import candidate_pairs, model_scores, tokenize_pairs
from rerank_scaling.precision import cpu_name, to_bf16_weights

PATHS = ("before", "after")


def one_round_rescoring(
    qids: Sequence[str],
    bf16: Sequence[float],
    fp32_of: Callable[[list[int]], list[float]],
    calibration: list[int],
    factor: float,
    grades: Sequence[int],
) -> tuple[list[float], int]:
    """The near-tie rule as of commit 6bf2156 (the baseline): scores and the pairs scored in fp32."""
    fp32 = dict(zip(calibration, fp32_of(calibration), strict=True))
    largest = max(abs(bf16[i] - f) for i, f in fp32.items())
    while True:
        window, tied = 2 * factor * largest, set()
        for indices in pairs_by_query(qids).values():
            values = np.asarray([bf16[i] for i in indices])
            graded = np.asarray([grades[i] for i in indices])
            close = (np.abs(values[:, None] - values[None, :]) <= window) & (
                graded[:, None] != graded[None, :]
            )
            tied.update(int(i) for i in np.asarray(indices)[close.any(axis=1)])
        todo = sorted(tied - fp32.keys())
        if not todo:
            break
        fp32.update(zip(todo, fp32_of(todo), strict=True))
        seen = max(abs(bf16[i] - fp32[i]) for i in todo)
        if seen <= factor * largest:
            break
        largest = seen
    return [fp32.get(i, b) for i, b in enumerate(bf16)], len(fp32)


def grade_orders(qids: Sequence[str], scores: Sequence[float], grades: Sequence[int]) -> list[list[int]]:
    """Each query's grades down its ranking (what every rank metric reads)."""
    by_query = pairs_by_query(qids).values()
    return [[grades[i] for i in sorted(rows, key=lambda i: -scores[i])] for rows in by_query]


@dataclass
class Checkpoint:
    """One checkpoint's dev pairs and what a scoring of them is checked against."""

    model: Any  # CrossEncoder, fp32
    tokens: Any
    pad: int
    batch: int
    factor: float
    grades: list[int]
    rescored: dict[str, int] = field(default_factory=dict)  # path -> pairs scored in fp32
    kept: dict[str, bool] = field(default_factory=dict)  # path -> every grade order fp32's

    def __post_init__(self) -> None:
        self.qids = [qid for qid, _ in self.tokens.keys]
        self.calibration = calibration_sample(len(self.qids), CALIBRATION_PAIRS)
        eager_fp32 = model_scores(self.model, self.tokens, self.batch, self.pad, "cpu", fused=False)
        self.truth = grade_orders(self.qids, eager_fp32, self.grades)

    def fp32_of(self, indices: list[int], fused: bool) -> list[float]:
        """fp32 scores of ``indices``: the eager forward, or the one the CPU kind's profile names."""
        return model_scores(self.model, self.tokens.select(indices), self.batch, self.pad, "cpu", fused=fused)

    def score(self, path: str) -> list[float]:
        """The evaluation's bf16 scoring ``before`` or ``after`` (module docstring)."""
        after = path == "after"
        low = to_bf16_weights(copy.deepcopy(self.model))
        bf16 = model_scores(low, self.tokens, self.batch, self.pad, "cpu", fused=after)
        factor = self.factor if after else SAFETY_FACTOR
        rule = (self.qids, bf16, partial(self.fp32_of, fused=after), self.calibration, factor, self.grades)
        if not after:
            scores, self.rescored[path] = one_round_rescoring(*rule)
        else:
            scores, report = rescore_near_ties(*rule)
            self.rescored[path] = report.rescored
        self.kept[path] = grade_orders(self.qids, scores, self.grades) == self.truth
        return scores


def main() -> None:
    from sentence_transformers.cross_encoder import CrossEncoder

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, help="a finished run's results directory")
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()[0]
    config = yaml.safe_load(args.config.read_text())
    evaluation, max_length = config["evaluation"], config["training"]["max_length"]
    torch.set_num_threads(evaluation["threads"])
    batch, depth, factor = (
        eval_batch_size(evaluation["batch_size"], "cpu"),
        evaluation["rerank_depth"],
        cpu_profile().near_tie_factor,
    )
    split = load_split(
        str(args.results / "data" / "collection"), str(args.results / "bm25" / "runs" / "dev.trec"), "dev",
        depth, texts_file=str(args.results / "eval" / "texts" / "dev.parquet"),
    )  # fmt: skip
    checkpoints = {}
    for run, ckpt in final_checkpoints(args.results).items():
        model = CrossEncoder(str(ckpt), device="cpu", max_length=max_length)
        pairs = candidate_pairs(split.candidates, depth)
        tokens = tokenize_pairs(model.tokenizer, pairs, split.queries, split.texts, max_length)
        grades = [split.qrels.get(qid, {}).get(docid, 0) for qid, docid in tokens.keys]
        pad = model.tokenizer.pad_token_id or 0
        checkpoints[run] = Checkpoint(model, tokens, pad, batch, factor, grades)
    cells = {(run, path): partial(c.score, path) for run, c in checkpoints.items() for path in PATHS}
    seconds = interleaved_times(cells, args.repeats, shuffle=1)
    median = {cell: statistics.median(values) for cell, values in seconds.items()}
    runs = list(checkpoints)
    rescored = {(run, p): checkpoints[run].rescored[p] for run in runs for p in PATHS}
    kept = {(run, p): checkpoints[run].kept[p] for run in runs for p in PATHS}
    gains = [median[(run, "before")] / median[(run, "after")] for run in runs]
    lines = [
        "# A checkpoint's bf16 evaluation scoring: before and after",
        "",
        f"`python benchmarks/bench_eval_scoring.py {args.results}` on **{cpu_name()}** "
        f"(kind `{cpu_kind()}`), {os.cpu_count()} CPUs, {evaluation['threads']} thread(s), torch "
        f"{torch.__version__}; load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run "
        f"time {(time.time() - started) / 60:.1f} min; {args.repeats} interleaved repeats (shuffled, after a "
        "warm-up round). The dev split: "
        f"{len(split.queries)} queries x {depth} candidates; batch {batch}; calibration sample "
        f"{CALIBRATION_PAIRS} pairs.",
        "",
        f"Before: eager bf16 pass, one-round near-tie rule, safety factor {SAFETY_FACTOR:g}, eager fp32 "
        "rescoring (6bf2156, the scoring of c896352). After: fused oneDNN encoder"
        f"{' with the compiled kernels' if encoder_kernels() else ''}, rounds rule, safety factor {factor:g} "
        f"(kind `{cpu_kind()}`), fp32 rescoring {'fused' if cpu_profile().fused_fp32 else 'eager'}. "
        "Seconds: median (min-max) of the cast, the bf16 pass and the fp32 rescoring.",
        "",
        "| checkpoint | before s | after s | speed-up | fp32 pairs before | fp32 pairs after | "
        "grade orders fp32's (before / after) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for run, gain in zip(runs, gains, strict=True):
        spans = [span(seconds[(run, p)], scale=1.0) for p in PATHS]
        lines.append(
            f"| {run} | {spans[0]} | {spans[1]} | {gain:.2f}x | {rescored[(run, 'before')]} | "
            f"{rescored[(run, 'after')]} | {kept[(run, 'before')]} / {kept[(run, 'after')]} |"
        )
    total = {p: sum(median[(run, p)] for run in runs) for p in PATHS}
    pairs = {p: sum(rescored[(run, p)] for run in runs) for p in PATHS}
    lines += [
        "",
        f"Over the {len(runs)} checkpoints: summed medians {total['before']:.1f} s before, "
        f"{total['after']:.1f} s after (**{total['before'] / total['after']:.2f}x**; per checkpoint, "
        "geometric mean "
        f"{float(np.exp(np.mean(np.log(gains)))):.2f}x); pairs scored in fp32 {pairs['before']} before, "
        f"{pairs['after']} after ({pairs['after'] / pairs['before']:.2f}x); every grade order fp32's: "
        f"{all(kept.values())}.",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
