"""Windowed vs dense attention: time and peak memory, as in seed paper 002 (Schlatt et al.), Table 3.

Two levels, each at sequence lengths 128...4096 and windows w in {4, 64}, one pair per batch
(a 32-token query segment, the rest document), MiniLM-L6 shapes (12 heads of 32 dims):

* the attention step of one layer, given q, k, v (B, H, S, D) and the prebuilt pattern:
  ``dense`` masked attention (S x S scores, masked softmax; the reference
  ``window_attention.masked_attention``), ``sdpa`` (``F.scaled_dot_product_attention`` with the
  pattern as a boolean mask), and ``window`` (the compiled banded products,
  ``window_attention.window_attention``);
* a whole cross-encoder forward (``BertForSequenceClassification``, 6 layers, random weights,
  4096 positions): ``dense`` = eager attention with the pattern as a 4-D additive mask,
  ``sdpa`` = SDPA with the pattern as a 4-D boolean mask, ``window`` = the patched model
  (``sparse_encoder.apply_window_attention``; its pattern is derived inside the forward).

All three compute the same function (checked before timing). Time: median over ``--repeats``
(more for fast calls) after ``--warmup`` calls, the three taking turns (CUDA events on a GPU).
Memory: peak allocation above the inputs (and weights) during one call: CPU allocator events
from the profiler, or ``torch.cuda.max_memory_allocated``. Ratios are dense / window and
sdpa / window.

    python benchmarks/bench_window_attention.py --out benchmarks/results/window_attention_cpu.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from benchmark_output import emit

from rerank_scaling import window_attention as wa
from rerank_scaling.sparse_encoder import AttentionVariant, apply_window_attention

HEADS, HEAD_DIM, LAYERS, QUERY_TOKENS = 12, 32, 6, 32
IMPLEMENTATIONS = ("dense", "sdpa", "window")


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _seconds(fn: Callable[[], object], device: str) -> float:
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3
    begin = time.perf_counter()
    fn()
    return time.perf_counter() - begin


def median_seconds(calls: dict[str, Callable[[], object]], device: str, warmup: int, repeats: int) -> dict:
    """Median wall time of each call after ``warmup`` untimed calls (CUDA events on a GPU).

    The calls take turns, so that load from other processes on a shared machine hits all alike;
    fast calls are repeated until they have run for about half a second (at least ``repeats``)."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    estimate = max(_seconds(fn, device) for fn in calls.values())
    rounds = max(repeats, min(50, int(0.5 / max(estimate, 1e-6))))
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            times[name].append(_seconds(fn, device))
    return {name: statistics.median(values) for name, values in times.items()}


def peak_bytes(fn: Callable[[], object], device: str) -> int:
    """Peak memory allocated during one call of ``fn``, above what was allocated before it."""
    if device == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    current = peak = 0
    for _, change in events:
        current += change
        peak = max(peak, current)
    return peak


def pair_inputs(length: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """token_type_ids and attention_mask (1, S) of one unpadded ``[CLS] q [SEP] d [SEP]`` pair."""
    types = torch.ones(1, length, dtype=torch.long, device=device)
    types[:, :QUERY_TOKENS] = 0
    return types, torch.ones_like(types)


def attention_steps(length: int, window: int, device: str, dtype: torch.dtype) -> dict[str, Callable]:
    """The three attention steps of one layer on the same random q, k, v and pattern."""
    types, mask = pair_inputs(length, device)
    generator = torch.Generator(device).manual_seed(length)
    q, k, v = torch.randn(3, 1, HEADS, length, HEAD_DIM, device=device, dtype=dtype, generator=generator)
    pattern = wa.dense_pattern_mask(types, mask, window)  # (B, S, S), True = attend
    layout = wa.window_layout(types, mask, window)
    return {
        "dense": lambda: wa.masked_attention(q, k, v, pattern),
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=pattern[:, None]),
        "window": lambda: wa.window_attention(q, k, v, layout),
    }


def model_forwards(length: int, window: int, device: str, dtype: torch.dtype) -> dict[str, Callable]:
    """Whole cross-encoder forwards: the same random BERT with the three attentions."""
    from transformers import BertConfig, BertForSequenceClassification

    config = dict(
        hidden_size=HEADS * HEAD_DIM,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=4 * HEADS * HEAD_DIM,
        max_position_embeddings=max(4096, length),
        num_labels=1,
    )
    types, mask = pair_inputs(length, device)
    input_ids = torch.randint(1000, 2000, (1, length), device=device)
    pattern = wa.dense_pattern_mask(types, mask, window)[:, None]  # (B, 1, S, S)
    additive = torch.zeros(pattern.shape, dtype=dtype, device=device).masked_fill(
        ~pattern, torch.finfo(dtype).min
    )
    forwards = {}
    for name, implementation, attention_mask in (
        ("dense", "eager", additive),
        ("sdpa", "sdpa", pattern),
        ("window", "sdpa", mask),
    ):
        torch.manual_seed(0)
        model = BertForSequenceClassification(BertConfig(**config, attn_implementation=implementation))
        model = model.to(device, dtype).eval()
        if name == "window":
            apply_window_attention(model, AttentionVariant(window))
        forwards[name] = (
            lambda model=model, attention_mask=attention_mask: model(
                input_ids=input_ids, token_type_ids=types, attention_mask=attention_mask
            ).logits
        )
    return forwards


def measure(
    make: Callable[..., dict[str, Callable]], lengths: list[int], windows: list[int], args: argparse.Namespace
) -> list[dict[str, float]]:
    rows = []
    for length in lengths:
        for window in windows:
            calls = make(length, window, args.device, args.dtype)
            with torch.inference_mode():
                outputs = {name: call().float() for name, call in calls.items()}
                for name in ("sdpa", "window"):  # same function, three implementations
                    torch.testing.assert_close(outputs[name], outputs["dense"], rtol=1e-2, atol=1e-3)
                row: dict[str, float] = {"s": length, "w": window}
                for name, seconds in median_seconds(calls, args.device, args.warmup, args.repeats).items():
                    row[f"{name}_s"] = seconds
                for name, call in calls.items():
                    row[f"{name}_bytes"] = peak_bytes(call, args.device)
            print(row, flush=True)
            rows.append(row)
            del calls
    return rows


def table(rows: list[dict[str, float]]) -> list[str]:
    lines = [
        "| s | w | dense ms | sdpa ms | window ms | dense / window | sdpa / window "
        "| dense MiB | sdpa MiB | window MiB | dense / window | sdpa / window |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        times = " | ".join(f"{row[f'{name}_s'] * 1e3:.1f}" for name in IMPLEMENTATIONS)
        memory = " | ".join(f"{row[f'{name}_bytes'] / 2**20:.1f}" for name in IMPLEMENTATIONS)
        time_ratios = " | ".join(f"{row[f'{name}_s'] / row['window_s']:.1f}x" for name in ("dense", "sdpa"))
        memory_ratios = " | ".join(
            f"{row[f'{name}_bytes'] / max(row['window_bytes'], 1):.1f}x" for name in ("dense", "sdpa")
        )
        lines.append(f"| {row['s']} | {row['w']} | {times} | {time_ratios} | {memory} | {memory_ratios} |")
    return lines


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096])
    parser.add_argument("--windows", type=int, nargs="+", default=[4, 64])
    parser.add_argument("--model-lengths", type=int, nargs="+", default=None, help="default: --lengths")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    args.dtype = getattr(torch, args.dtype)
    wa.load_kernels()
    if args.device == "cuda":
        machine = torch.cuda.get_device_name()
    else:
        machine = f"CPU {platform.machine()}, {torch.get_num_threads()} threads"
    header = (
        f"Windowed attention (seed paper 002, Table 3 setting): {machine}, {str(args.dtype)[6:]}, batch 1, "
        f"{QUERY_TOKENS}-token query segment, {HEADS} heads x {HEAD_DIM} dims; median of >= {args.repeats} "
        f"interleaved calls after {args.warmup} warm-up; memory = peak allocation above inputs and weights."
    )
    lines = [header, "", "Attention step (one layer, pattern prebuilt):", ""]
    lines += table(measure(attention_steps, args.lengths, args.windows, args))
    lines += ["", f"Whole cross-encoder forward ({LAYERS} layers, hidden {HEADS * HEAD_DIM}, inference):", ""]
    lines += table(measure(model_forwards, args.model_lengths or args.lengths, args.windows, args))
    text = "\n".join(lines) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
