"""The fused oneDNN encoder (attending by SDPA, and by the compiled packed attention kernel) against
the eager bf16 forward, and all three against the same run's bf16 matmul peak, per default size, in
one run with interleaved repeats; with ``--dtype fp32``, the fused encoder's fp32 primitives against
the eager fp32 forward and the fp32 peak (the kernels are bf16-only).

    python benchmarks/bench_fused_encoder.py --out benchmarks/results/fused_encoder_amx.md
    python benchmarks/bench_fused_encoder.py --dtype fp32 --out benchmarks/results/fused_encoder_fp32_zen2.md

fp32's peak is the better of PyTorch's GEMM (MKL on x86) and oneDNN's on the same shape, both timed
in the same rounds, since the fused encoder's GEMMs are oneDNN's.

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
import dataclasses
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

from rerank_scaling.compute import cpu_profiles, fused_encoder
from rerank_scaling.compute.cpu_profiles import cpu_kind, eval_batch_size
from rerank_scaling.compute.fused_encoder import fused_forward
from rerank_scaling.evaluation.rerank import model_scores, tokenize_pairs
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.planning.encoder_flops import EncoderShape
from rerank_scaling.precision import cpu_name, fp32_score_layer, to_bf16_weights
from rerank_scaling.settings import model_spec

#: The timed paths per precision (the compiled kernels take bf16 only).
PATHS = {"bf16": ("eager", "fused", "kernel"), "fp32": ("eager", "fused")}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
GEMM_CALLS = 20  # per timed call of the peak's GEMM (about as long as a forward)


def gemm_calls(a: torch.Tensor, b: torch.Tensor) -> None:
    """The peak's cell: :data:`GEMM_CALLS` products, each output dropped before the next (a list of
    them all, this cell before 1a15e0e, held 20 fresh outputs at once and timed their page faults:
    it read 571-803 GFLOP/s where the same GEMM alone ran at 1,362)."""
    for _ in range(GEMM_CALLS):
        a @ b


def onednn_gemm_calls(a: torch.Tensor, weight: torch.Tensor) -> None:
    """:func:`gemm_calls` by oneDNN's linear primitive (``weight`` reordered), the fused encoder's GEMM."""
    for _ in range(GEMM_CALLS):
        torch.ops.mkldnn._linear_pointwise(a, weight, None, "none", [], "")


def forward_call(model, features: dict, path: str):
    """One scoring forward of ``features`` by ``model`` (bf16 or fp32 weights) by ``path`` (:data:`PATHS`)."""
    fused = path != "eager"
    forward = fused_forward(model, "cpu", kernels=path == "kernel", fp32=True) if fused else model
    if forward is None:
        raise SystemExit("the fused encoder does not apply to this model on this CPU")

    def run():
        with torch.inference_mode(), fp32_score_layer(model, "cpu"):
            return forward(dict(features))["scores"].float()

    return run


def dev_pass(model, tokens, batch: int, pad: int, path: str):
    """:func:`model_scores` over the dev pairs by ``path``; *fused* hides the compiled kernel from the
    fused encoder (the path before it existed); fp32 weights are fused whatever the CPU kind's profile."""
    hidden = mock.patch.object(fused_encoder, "encoder_kernels", lambda: None)

    forced = dataclasses.replace(cpu_profiles.cpu_profile(), fused_fp32=True)  # its fp32, whatever the kind
    fp32 = mock.patch.object(cpu_profiles, "cpu_profile", lambda kind=None: forced)

    def run():
        with hidden if path == "fused" else contextlib.nullcontext(), fp32:
            return model_scores(model, tokens, batch, pad, "cpu", fused=path != "eager")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sizes = ["L1", "L2", "L3", "L4", "L6"]
    parser.add_argument("--sizes", nargs="+", default=sizes, help="config.yaml's models")
    parser.add_argument("--dtype", choices=sorted(PATHS), default="bf16", help="the weights' precision")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--peak-repeats", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()[0]
    config = yaml.safe_load(CONFIG.read_text())
    threads = config["evaluation"]["threads"]
    torch.set_num_threads(threads)
    max_length, batch = (
        config["training"]["max_length"],
        eval_batch_size(config["evaluation"]["batch_size"], "cpu"),
    )
    pairs, queries, texts = workload(config)
    paths, dtype = PATHS[args.dtype], DTYPES[args.dtype]
    _, shape = matmul_peak(dtype, args.peak_repeats)
    a, b = torch.randn(shape[:2], dtype=dtype), torch.randn(shape[1:], dtype=dtype)
    gemm_flops = GEMM_CALLS * 2.0 * shape[0] * shape[1] * shape[2]
    peak_cells = {("peak", "gemm", "torch"): functools.partial(gemm_calls, a, b)}
    if args.dtype == "fp32":
        weight = torch.ops.mkldnn._reorder_linear_weight(b.t().contiguous(), None)
        peak_cells[("peak", "gemm", "oneDNN")] = functools.partial(onednn_gemm_calls, a, weight)
    cells = dict(peak_cells)
    flops, errors = {}, {}
    for spec in (m for m in config["models"] if m["name"] in args.sizes):
        name = spec["name"]
        fp32 = build_cross_encoder(spec, max_length, 0).eval()
        model = to_bf16_weights(copy.deepcopy(fp32)) if args.dtype == "bf16" else fp32
        features = features_of(fp32, batch, max_length)
        encoder = EncoderShape.from_hf_config(fp32.model.config, model_spec(spec)["head"])
        flops[name] = batch * encoder.forward_flops(int(features["input_ids"].shape[1]))
        tokens = tokenize_pairs(fp32.tokenizer, pairs, queries, texts, max_length)
        pad = fp32.tokenizer.pad_token_id or 0
        for path in paths:
            cells[(name, "forward", path)] = forward_call(model, features, path)
            cells[(name, "dev pass", path)] = dev_pass(model, tokens, batch, pad, path)
        scores = {path: np.array(cells[(name, "dev pass", path)]()) for path in paths}
        scores["fp32"] = np.array(model_scores(fp32, tokens, batch, pad, "cpu", fused=False))
        errors[name] = [float(np.abs(scores[p] - scores[q]).max()) for p, q in error_pairs(args.dtype)]
    seconds = interleaved_times(cells, args.repeats, shuffle=1)
    median = {cell: statistics.median(values) for cell, values in seconds.items()}
    peak_cell = min(peak_cells, key=lambda cell: median[cell])
    peak = gemm_flops / median[peak_cell]
    peak_best = gemm_flops / min(seconds[peak_cell])
    by_library = ", ".join(f"{cell[2]} {gemm_flops / median[cell] / 1e9:.0f}" for cell in peak_cells)
    fast, slow = paths[-1], paths[-2::-1]  # the pipeline's path over each other, nearest first

    lines = [
        f"# The fused oneDNN encoder in {args.dtype}"
        + (
            ", with PyTorch's attention and layer norm and with compiled kernels"
            if args.dtype == "bf16"
            else ""
        ),
        "",
        f"`python benchmarks/bench_fused_encoder.py --dtype {args.dtype}` at commit {commit()} on "
        f"**{cpu_name()}** (kind `{cpu_kind()}`), {os.cpu_count()} CPUs, {threads} thread(s), torch "
        f"{torch.__version__}; load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run "
        f"time {(time.time() - started) / 60:.1f} min; {args.repeats} interleaved repeats (shuffled).",
        "",
        f"{args.dtype} matmul peak, this run: **{peak / 1e9:.0f} GFLOP/s** ({peak_cell[2]}'s GEMM), the "
        f"median over the same rounds of the best GEMM shape ({shape[0]}x{shape[1]}x{shape[2]}, "
        f"{GEMM_CALLS} calls a cell; GFLOP/s of the median by library: {by_library}); its best round "
        f"{peak_best / 1e9:.0f} GFLOP/s. Shares below: a median rate over the median peak.",
        "",
        PATH_TEXT[args.dtype] + f" Forward: one batch of {batch} pairs "
        f"x {max_length} tokens, {args.dtype} weights; dev pass: {len(pairs)} pairs of the default's dev "
        f"split ({len(queries)} queries x {config['evaluation']['rerank_depth']}), batch {batch}, "
        "length-sorted and padded per batch. Cells: median ms (min-max); GFLOP/s of the median (share "
        "of the peak); speed-ups are ratios of medians.",
        "",
        "## Forward",
        "",
        "| model | "
        + " | ".join(f"{p} ms | {p} GFLOP/s" for p in paths)
        + " | "
        + " | ".join(f"{fast} / {p}" for p in slow)
        + " |",
        "|---|" + "---:|" * (2 * len(paths) + len(slow)),
    ]
    labels = [f"max abs({p}{' bf16' * (q == 'fp32')} - {q})" for p, q in error_pairs(args.dtype)]
    dev_rows = [
        "## Dev pass",
        "",
        "| model | "
        + " | ".join(f"{p} ms" for p in paths)
        + " | "
        + " | ".join(f"{fast} / {p}" for p in slow)
        + " | "
        + " | ".join(labels)
        + " |",
        "|---|" + "---:|" * (len(paths) + len(slow) + len(labels)),
    ]

    def gain(name: str, workload: str, before: str) -> float:
        return median[(name, workload, before)] / median[(name, workload, fast)]

    for name in errors:
        rate = {p: flops[name] / median[(name, "forward", p)] for p in paths}
        times = {
            key: span(seconds[(name, *key)], digits=1)
            for key in itertools.product(("forward", "dev pass"), paths)
        }
        cells_of = " | ".join(
            f"{times['forward', p]} | {rate[p] / 1e9:.0f} ({rate[p] / peak:.0%})" for p in paths
        )
        gains = " | ".join(f"{gain(name, 'forward', p):.2f}x" for p in slow)
        lines.append(f"| {name} | {cells_of} | {gains} |")
        dev_rows.append(
            f"| {name} | {' | '.join(times['dev pass', p] for p in paths)} | "
            + " | ".join(f"{gain(name, 'dev pass', p):.2f}x" for p in slow)
            + " | "
            + " | ".join(f"{error:.2g}" for error in errors[name])
            + " |"
        )

    def geometric_mean(values: list[float]) -> float:
        return float(np.exp(np.mean(np.log(values))))

    means = ", ".join(
        f"{fast} over {p} **{geometric_mean([gain(n, 'dev pass', p) for n in errors]):.2f}x**" for p in slow
    )
    lines += ["", *dev_rows, "", f"Dev pass speed-ups, geometric means over the sizes: {means}.", ""]
    emit("\n".join(lines), args.out)


#: The score differences reported per size: (path, reference) pairs; ``fp32``: the eager fp32 scores.
def error_pairs(dtype: str) -> list[tuple[str, str]]:
    if dtype == "bf16":
        return [("kernel", "fused"), ("fused", "eager"), ("eager", "fp32")]
    return [("fused", "eager")]


TITLE_TAIL = {"bf16": ", with PyTorch's attention and layer norm and with compiled kernels", "fp32": ""}
PATH_TEXT = {
    "bf16": "Paths: *eager* (transformers' bf16 forward), *fused* (the fused oneDNN encoder with PyTorch's "
    "SDPA and layer norm), *kernel* (the fused encoder with the compiled `packed_attention` and "
    "`row_layer_norm` kernels: the pipeline's path where the extension is built).",
    "fp32": "Paths: *eager* (transformers' fp32 forward: PyTorch's GEMMs, MKL on x86), *fused* (the fused "
    "oneDNN encoder's fp32 primitives with PyTorch's SDPA and layer norm: "
    "`CpuProfile.fused_fp32`).",
}


if __name__ == "__main__":
    main()
