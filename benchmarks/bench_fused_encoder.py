"""The fused oneDNN encoder (attending by SDPA, and by the compiled packed attention kernel) against
the eager bf16 forward, and all three against the same run's bf16 matmul peak, per default size, in
one run with interleaved repeats.

    python benchmarks/bench_fused_encoder.py --out benchmarks/results/fused_encoder_amx.md

In one process: the bf16 matmul peak (``bench_cpu_peak.matmul_peak``: the best GEMM shape), then
that GEMM as a cell of its own beside the workloads, so that the peak the shares are taken of is
measured in the same rounds (a shared machine's speed drifts; a peak measured once at the start
made shares of 60-76% out of a slow minute). Per default size
(config.yaml's models, ``evaluation.threads`` threads) two workloads, each in bf16 with the weights
cast once (:func:`rerank_scaling.precision.to_bf16_weights`, the evaluation's bf16 pass) by three
paths: *eager*; *fused*, :func:`rerank_scaling.compute.fused_encoder.fused_forward` with PyTorch's
SDPA and layer norm (``kernels=False``; for the dev pass the kernels are hidden from
``model_scores``); and
*kernel*, the fused encoder with the compiled ``packed_attention`` and ``row_layer_norm`` kernels
(the pipeline's path where the extension is built):

* *forward*: one batch of ``evaluation.batch_size`` full-length pairs (``training.max_length``
  tokens), the shape ``benchmarks/results/compile_amx.md`` measured; its FLOPs
  (:class:`rerank_scaling.planning.encoder_flops.EncoderShape`) over the median time give the share
  of the peak;
* *dev pass*: :func:`rerank_scaling.evaluation.rerank.model_scores` over the default's dev split
  (``bench_eval_batch.workload``: its queries x ``evaluation.rerank_depth`` passages, length-sorted,
  padded per batch), the bf16 pass one checkpoint's evaluation makes.

Every repeat times all cells in a new random order (``interleaved.interleaved_times``); the table
gives medians (min-max), the speed-ups (ratios of medians) and the largest |kernel - fused| and
|fused - eager| scores of the dev pass against the largest |eager bf16 - fp32| (bf16's own error,
the yardstick). The CPU's
name and the load average before and after are in the header (the machine may be shared).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import itertools
import os
import statistics
import time
from unittest import mock

import numpy as np
import torch
import yaml
from bench_cpu_peak import features_of, matmul_peak
from bench_eval_batch import CONFIG, workload
from benchmark_output import commit, emit
from interleaved import interleaved_times, span

from rerank_scaling.compute import fused_encoder
from rerank_scaling.compute.cpu_profiles import cpu_kind
from rerank_scaling.compute.fused_encoder import fused_forward
from rerank_scaling.evaluation.rerank import model_scores, tokenize_pairs
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.planning.encoder_flops import EncoderShape
from rerank_scaling.precision import cpu_name, fp32_score_layer, to_bf16_weights
from rerank_scaling.settings import model_spec

PATHS = ("eager", "fused", "kernel")
GEMM_CALLS = 20  # per timed call of the peak's GEMM (about as long as a forward)


def gemm_calls(a: torch.Tensor, b: torch.Tensor) -> None:
    """The peak's cell: :data:`GEMM_CALLS` products, each output dropped before the next (a list of
    them all, this cell before 1a15e0e, held 20 fresh outputs at once and timed their page faults:
    it read 571-803 GFLOP/s where the same GEMM alone ran at 1,362)."""
    for _ in range(GEMM_CALLS):
        a @ b


def forward_call(model, features: dict, path: str):
    """One scoring forward of ``features`` by ``model`` (bf16 weights) by ``path`` (:data:`PATHS`)."""
    forward = fused_forward(model, "cpu", kernels=path == "kernel") if path != "eager" else model
    if forward is None:
        raise SystemExit("the fused encoder does not apply to this model on this CPU")

    def run():
        with torch.inference_mode(), fp32_score_layer(model, "cpu"):
            return forward(dict(features))["scores"].float()

    return run


def dev_pass(model, tokens, batch: int, pad: int, path: str):
    """:func:`model_scores` over the dev pairs by ``path``; *fused* hides the compiled kernel from the
    fused encoder (the path before it existed)."""
    hidden = mock.patch.object(fused_encoder, "encoder_kernels", lambda: None)

    def run():
        with hidden if path == "fused" else contextlib.nullcontext():
            return model_scores(model, tokens, batch, pad, "cpu", fused=path != "eager")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sizes = ["L1", "L2", "L3", "L4", "L6"]
    parser.add_argument("--sizes", nargs="+", default=sizes, help="config.yaml's models")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--peak-repeats", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()[0]
    config = yaml.safe_load(CONFIG.read_text())
    threads = config["evaluation"]["threads"]
    torch.set_num_threads(threads)
    max_length, batch = config["training"]["max_length"], config["evaluation"]["batch_size"]
    pairs, queries, texts = workload(config)
    _, shape = matmul_peak(torch.bfloat16, args.peak_repeats)
    a, b = torch.randn(shape[:2], dtype=torch.bfloat16), torch.randn(shape[1:], dtype=torch.bfloat16)
    gemm_flops = GEMM_CALLS * 2.0 * shape[0] * shape[1] * shape[2]
    cells = {("peak", "gemm", "bf16"): functools.partial(gemm_calls, a, b)}
    flops, errors = {}, {}
    for spec in (m for m in config["models"] if m["name"] in args.sizes):
        name = spec["name"]
        fp32 = build_cross_encoder(spec, max_length, 0).eval()
        low = to_bf16_weights(copy.deepcopy(fp32))
        features = features_of(fp32, batch, max_length)
        encoder = EncoderShape.from_hf_config(fp32.model.config, model_spec(spec)["head"])
        flops[name] = batch * encoder.forward_flops(int(features["input_ids"].shape[1]))
        tokens = tokenize_pairs(fp32.tokenizer, pairs, queries, texts, max_length)
        pad = fp32.tokenizer.pad_token_id or 0
        for path in PATHS:
            cells[(name, "forward", path)] = forward_call(low, features, path)
            cells[(name, "dev pass", path)] = dev_pass(low, tokens, batch, pad, path)
        reference = np.array(model_scores(fp32, tokens, batch, pad, "cpu"))
        eager, fused, kernel = (np.array(cells[(name, "dev pass", p)]()) for p in PATHS)
        errors[name] = tuple(
            float(np.abs(a - b).max()) for a, b in ((kernel, fused), (fused, eager), (eager, reference))
        )
    seconds = interleaved_times(cells, args.repeats, shuffle=1)
    median = {cell: statistics.median(values) for cell, values in seconds.items()}
    peak = gemm_flops / median[("peak", "gemm", "bf16")]
    peak_best = gemm_flops / min(seconds[("peak", "gemm", "bf16")])

    lines = [
        "# The fused oneDNN encoder, with PyTorch's attention and layer norm and with compiled kernels",
        "",
        f"`python benchmarks/bench_fused_encoder.py` at commit {commit()} on **{cpu_name()}** (kind "
        f"`{cpu_kind()}`), {os.cpu_count()} CPUs, {threads} thread(s), torch {torch.__version__}; load "
        f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run time "
        f"{(time.time() - started) / 60:.1f} min; {args.repeats} interleaved repeats (shuffled).",
        "",
        f"bf16 matmul peak, this run: **{peak / 1e9:.0f} GFLOP/s**, the median over the same rounds of "
        f"the best GEMM shape ({shape[0]}x{shape[1]}x{shape[2]}, {GEMM_CALLS} calls a cell); its best "
        f"round {peak_best / 1e9:.0f} GFLOP/s. Shares below: a median rate over the median peak.",
        "",
        "Paths: *eager* (transformers' bf16 forward), *fused* (the fused oneDNN encoder with PyTorch's "
        "SDPA and layer norm), *kernel* (the fused encoder with the compiled `packed_attention` and "
        "`row_layer_norm` kernels: the pipeline's path where the extension is built). "
        f"Forward: one batch of {batch} pairs "
        f"x {max_length} tokens, bf16 weights; dev pass: {len(pairs)} pairs of the default's dev split "
        f"({len(queries)} queries x {config['evaluation']['rerank_depth']}), batch {batch}, "
        "length-sorted and padded per batch. Cells: median ms (min-max); GFLOP/s of the median (share "
        "of the peak); speed-ups are ratios of medians.",
        "",
        "## Forward",
        "",
        "| model | eager ms | eager GFLOP/s | fused ms | fused GFLOP/s | kernel ms | kernel GFLOP/s | "
        "kernel / fused | kernel / eager |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    dev_rows = [
        "## Dev pass",
        "",
        "| model | eager ms | fused ms | kernel ms | kernel / fused | kernel / eager | "
        "max abs(kernel - fused) | max abs(fused - eager) | max abs(eager bf16 - fp32) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def gain(name: str, workload: str, before: str, after: str = "kernel") -> float:
        return median[(name, workload, before)] / median[(name, workload, after)]

    for name in errors:
        rate = {p: flops[name] / median[(name, "forward", p)] for p in PATHS}
        times = {
            key: span(seconds[(name, *key)], digits=1)
            for key in itertools.product(("forward", "dev pass"), PATHS)
        }
        cells_of = " | ".join(
            f"{times['forward', p]} | {rate[p] / 1e9:.0f} ({rate[p] / peak:.0%})" for p in PATHS
        )
        gains = f"{gain(name, 'forward', 'fused'):.2f}x | {gain(name, 'forward', 'eager'):.2f}x"
        lines.append(f"| {name} | {cells_of} | {gains} |")
        dev_rows.append(
            f"| {name} | {' | '.join(times['dev pass', p] for p in PATHS)} | "
            f"{gain(name, 'dev pass', 'fused'):.2f}x | {gain(name, 'dev pass', 'eager'):.2f}x | "
            + " | ".join(f"{error:.2g}" for error in errors[name])
            + " |"
        )

    def geometric_mean(values: list[float]) -> float:
        return float(np.exp(np.mean(np.log(values))))

    lines += [
        "",
        *dev_rows,
        "",
        "Dev pass speed-ups, geometric means over the sizes: kernel over fused "
        f"**{geometric_mean([gain(n, 'dev pass', 'fused') for n in errors]):.2f}x**, kernel over eager "
        f"**{geometric_mean([gain(n, 'dev pass', 'eager') for n in errors]):.2f}x**.",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
