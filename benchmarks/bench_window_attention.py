"""Windowed attention vs the attention users already have: time and peak memory (Schlatt et al., Sparse
Attention on Cross-Encoders, Table 3 setting: one pair per batch, a 32-token query segment, MiniLM-L6 shapes,
12 heads x 32).

Three levels, windows w in {4, 64}:

* the attention step of one layer, given q, k, v (B, H, S, D) and the prebuilt pattern:
  ``sdpa_masked`` (``F.scaled_dot_product_attention`` with the pattern as a boolean mask),
  ``sdpa_full`` (SDPA without a mask: the dense cross-encoder), ``flex`` (FlexAttention with a
  block mask of the pattern, ``torch.compile``'d; compilation excluded, warm-up included) and
  ``window`` (``window_attention.window_attention``: the fused kernel);
* a whole 6-layer cross-encoder forward (random-weight BERT of MiniLM-L6 shape, inference), and
* a training step (forward + backward of the same model, BERT's dropout 0.1 on hidden states and
  attention probabilities in all three): ``sdpa_masked`` = SDPA with the pattern as a 4-D mask, ``sdpa_full``
  = SDPA without a mask, ``window`` = the model patched by ``sparse_encoder.apply_window_attention``.

The windowed, masked and flex variants compute the same function (checked before timing).
Time: per implementation the median and the interquartile range of ``--repeats`` (attention step)
or ``--model-repeats`` (model levels) interleaved rounds
(implementations take turns in every round, so load hits all alike) after ``--warmup`` rounds,
with ``torch.set_num_threads(--threads)``. Memory: peak bytes allocated during one call above what
was allocated before it, from the profiler's allocator events (every ATen allocation of the call,
kernel scratch included; ``torch.cuda.max_memory_allocated`` on a GPU). Load: other processes'
CPU time during the run (from /proc) and the load average before and after; a run during which
others used more than ``--max-load`` cores is flagged LOADED in the output, and ``--require-quiet``
refuses to start on a loaded machine.

One command regenerates the committed table and the docs page's numbers quoted from it (about 10 min on
2 quiet cores with ``--size quick``)::

    python benchmarks/bench_window_attention.py --size quick \\
        --out benchmarks/results/window_attention_cpu.md --readme docs/windowed-attention.md
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from benchmark_output import emit
from interleaved import interleaved_times

from rerank_scaling.compute.extension_build import load_kernels
from rerank_scaling.training import window_attention as wa
from rerank_scaling.training.sparse_encoder import AttentionVariant, apply_window_attention

HEADS, HEAD_DIM, LAYERS, QUERY_TOKENS = 12, 32, 6, 32
SIZES = {  # attention-step lengths, model lengths ("smoke": checks the script runs, seconds)
    "smoke": ([256], [256]),
    "quick": ([512, 1024, 2048], [1024]),
    "full": ([512, 1024, 2048, 4096], [1024, 2048]),
}
README_BEGIN, README_END = (
    "<!-- window-attention-benchmark:begin -->",
    "<!-- window-attention-benchmark:end -->",
)


# --- machine load -------------------------------------------------------------------------------


def _other_cpu_seconds() -> float:
    """CPU seconds that every process but this one has used since boot: the busy time of all CPUs
    (/proc/stat: user, nice, system, irq, softirq, steal) minus this process's own CPU time. Unlike
    a scan of /proc/<pid>, this also counts processes that start and end during the run."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return busy - (own.user + own.system)


@dataclass
class LoadMonitor:
    """Other processes' CPU use (in cores) over the run, and the load average before and after."""

    started: float = field(default_factory=time.monotonic)
    others: float = field(default_factory=_other_cpu_seconds)
    load_before: float = field(default_factory=lambda: os.getloadavg()[0])

    def summary(self, max_load: float) -> tuple[bool, str]:
        cores = (_other_cpu_seconds() - self.others) / max(time.monotonic() - self.started, 1e-9)
        loaded = cores > max_load
        text = (
            f"machine load: other processes used {cores:.2f} cores on average during the run "
            f"(threshold {max_load}); 1-min load average {self.load_before:.2f} before, "
            f"{os.getloadavg()[0]:.2f} after"
        )
        return loaded, text


# --- timing and memory --------------------------------------------------------------------------


def median_iqr(values: list[float]) -> tuple[float, float, float]:
    """Median, first and third quartile."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return median, q1, q3


def peak_bytes(fn: Callable[[], object], device: str) -> int:
    """Peak bytes allocated during one call of ``fn``, above what was allocated before it."""
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
    changes = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    current = peak = 0
    for _, change in changes:
        current += change
        peak = max(peak, current)
    return peak


# --- the measured calls -------------------------------------------------------------------------


def pair_inputs(length: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """token_type_ids and attention_mask (1, S) of one unpadded ``[CLS] q [SEP] d [SEP]`` pair."""
    types = torch.ones(1, length, dtype=torch.long, device=device)
    types[:, :QUERY_TOKENS] = 0
    return types, torch.ones_like(types)


def attention_steps(length: int, window: int, device: str, dtype: torch.dtype) -> dict[str, Callable]:
    """The attention step of one layer, four ways, on the same random q, k, v and pattern."""
    types, mask = pair_inputs(length, device)
    generator = torch.Generator(device).manual_seed(length)
    q, k, v = torch.randn(3, 1, HEADS, length, HEAD_DIM, device=device, dtype=dtype, generator=generator)
    pattern = wa.dense_pattern_mask(types, mask, window)[:, None]  # (B, 1, S, S), True = attend
    layout = wa.window_layout(types, mask, window)
    block_mask = wa.flex_block_mask(layout)
    return {
        "sdpa_masked": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=pattern),
        "sdpa_full": lambda: F.scaled_dot_product_attention(q, k, v),
        "flex": lambda: wa.flex_window_attention(q, k, v, block_mask),
        "window": lambda: wa.window_attention(q, k, v, layout),
    }


def _models(length: int, window: int, device: str, dtype: torch.dtype) -> dict[str, tuple]:
    """(model, attention_mask) per implementation: the same random MiniLM-L6-shaped BERT."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        hidden_size=HEADS * HEAD_DIM,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=4 * HEADS * HEAD_DIM,
        max_position_embeddings=max(512, length),
        num_labels=1,
        attn_implementation="sdpa",
    )
    types, mask = pair_inputs(length, device)
    pattern = wa.dense_pattern_mask(types, mask, window)[:, None]  # (B, 1, S, S)
    models = {}
    for name, attention_mask in (("sdpa_masked", pattern), ("sdpa_full", mask), ("window", mask)):
        torch.manual_seed(0)
        # a config of its own: selecting the windowed attention sets it on the model's config
        model = BertForSequenceClassification(copy.deepcopy(config)).to(device, dtype)
        if name == "window":
            apply_window_attention(model, AttentionVariant(window))
        models[name] = (model, attention_mask, types)
    return models


def model_forwards(length: int, window: int, device: str, dtype: torch.dtype) -> dict[str, Callable]:
    """Whole 6-layer cross-encoder forwards (inference)."""
    input_ids = torch.randint(1000, 2000, (1, length), device=device)
    calls = {}
    for name, (model, attention_mask, types) in _models(length, window, device, dtype).items():
        model.eval()

        def forward(model=model, attention_mask=attention_mask, types=types) -> torch.Tensor:
            with torch.inference_mode():
                return model(input_ids=input_ids, token_type_ids=types, attention_mask=attention_mask).logits

        calls[name] = forward
    return calls


def training_steps(length: int, window: int, device: str, dtype: torch.dtype) -> dict[str, Callable]:
    """Forward + backward of the whole model (gradients set to None between steps)."""
    input_ids = torch.randint(1000, 2000, (1, length), device=device)
    calls = {}
    for name, (model, attention_mask, types) in _models(length, window, device, dtype).items():
        model.train()

        def step(model=model, attention_mask=attention_mask, types=types) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            logits = model(input_ids=input_ids, token_type_ids=types, attention_mask=attention_mask).logits
            logits.sum().backward()
            return logits.detach()

        calls[name] = step
    return calls


def measure(
    make: Callable[..., dict[str, Callable]],
    lengths: list[int],
    windows: list[int],
    repeats: int,
    args: argparse.Namespace,
) -> list[dict]:
    rows = []
    for length in lengths:
        for window in windows:
            calls = make(length, window, args.device, args.dtype)
            with torch.no_grad() if make is not training_steps else torch.enable_grad():
                outputs = {name: call().float() for name, call in calls.items()}  # warm-up, compile
            for name in calls:  # the same function, except the dense cross-encoder (and training's dropout)
                if name not in ("sdpa_full", "window") and make is not training_steps:
                    torch.testing.assert_close(outputs[name], outputs["window"], rtol=1e-2, atol=1e-3)
            times = interleaved_times(calls, repeats, args.warmup, device=args.device)
            row: dict = {"s": length, "w": window}
            for name, call in calls.items():
                row[name] = (*median_iqr(times[name]), peak_bytes(call, args.device))
            print(row, flush=True)
            rows.append(row)
            del calls
    return rows


# --- the report ---------------------------------------------------------------------------------


def table(rows: list[dict]) -> list[str]:
    """Markdown: per implementation the median ms [IQR] and peak MiB; ratios to ``window``."""
    names = [name for name in rows[0] if name not in ("s", "w")]
    others = [name for name in names if name != "window"]
    header = ["s", "w", *(f"{n} ms [IQR]" for n in names), *(f"{n} / window time" for n in others)]
    header += [f"{n} MiB" for n in names] + [f"{n} / window memory" for n in others]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for row in rows:
        cells = [str(row["s"]), str(row["w"])]
        cells += [f"{row[n][0] * 1e3:.2f} [{row[n][1] * 1e3:.2f}-{row[n][2] * 1e3:.2f}]" for n in names]
        cells += [f"{row[n][0] / row['window'][0]:.2f}x" for n in others]
        cells += [f"{row[n][3] / 2**20:.2f}" for n in names]
        cells += [f"{row[n][3] / max(row['window'][3], 1):.2f}x" for n in others]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def target_lines(levels: dict[str, list[dict]]) -> list[str]:
    """The benchmark's targets, checked on this run: the windowed version is faster than every baseline
    and needs no more memory than SDPA (attention step at s >= 512, model levels at s >= 1024)."""
    misses = []
    for level, rows in levels.items():
        least = 512 if level == "attention step" else 1024
        for row in (r for r in rows if r["s"] >= least):
            where = f"{level} s={row['s']} w={row['w']}"
            for name in (n for n in row if n not in ("s", "w", "window")):
                time_ratio = row[name][0] / row["window"][0]
                if time_ratio < 1:
                    misses.append(f"{where}: {1 / time_ratio:.2f}× the time of {name}")
                memory_ratio = row[name][3] / max(row["window"][3], 1)
                if name.startswith("sdpa") and memory_ratio < 1:
                    misses.append(f"{where}: {1 / memory_ratio:.3f}× {name}'s memory")
    if not misses:
        return ["Targets met in this run: faster than every baseline, memory ≤ SDPA's, at every shape."]
    return ["Targets missed in this run: " + "; ".join(misses) + "."]


def readme_block(levels: dict[str, list[dict]], source: str, loaded: bool, minutes: float) -> str:
    """The README's summary: windowed vs each baseline at w in {4, 64}, per level (time, memory)."""
    lines = [
        README_BEGIN,
        f"Generated by `benchmarks/bench_window_attention.py` into `{source}` (run time {minutes:.1f} min)"
        + (" — **LOADED machine: preliminary, not for quoting**" if loaded else "")
        + "; ratios are baseline / windowed (> 1: the windowed version is faster or smaller).",
        "",
        "| level | s | w | vs SDPA masked: time | memory | vs SDPA full: time | memory "
        "| vs FlexAttention: time | memory |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level, rows in levels.items():
        for row in rows:
            cells = [level, str(row["s"]), str(row["w"])]
            for name in ("sdpa_masked", "sdpa_full", "flex"):
                if name not in row:
                    cells += ["–", "–"]
                    continue
                cells += [
                    f"{row[name][0] / row['window'][0]:.2f}×",
                    f"{row[name][3] / max(row['window'][3], 1):.2f}×",
                ]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *target_lines(levels), README_END]
    return "\n".join(lines)


def update_readme(path: str, block: str) -> None:
    """Replace the text between the benchmark markers in ``path``."""
    text = Path(path).read_text()
    pattern = re.compile(re.escape(README_BEGIN) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {README_BEGIN} ... {README_END} block to update")
    Path(path).write_text(pattern.sub(lambda _: block, text))


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--size", default="quick", choices=sorted(SIZES))
    parser.add_argument("--windows", type=int, nargs="+", default=[4, 64])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15, help="rounds for the attention step")
    parser.add_argument("--model-repeats", type=int, default=7, help="rounds for the model levels")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    parser.add_argument("--max-load", type=float, default=0.25, help="other processes' cores: above = LOADED")
    parser.add_argument("--require-quiet", action="store_true", help="refuse to run on a loaded machine")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="cpu", choices=["cpu"], help="the fused kernel is CPU-only")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--readme",
        default=None,
        help="page to update between the benchmark markers (docs/windowed-attention.md)",
    )
    args = parser.parse_args()
    args.dtype = getattr(torch, args.dtype)
    torch.set_num_threads(args.threads)
    if load_kernels() is None:
        raise SystemExit("the windowed-attention extension did not build (see the warning): nothing to time")
    if args.require_quiet:
        probe = LoadMonitor()
        time.sleep(5)
        loaded, text = probe.summary(args.max_load)
        if loaded:
            raise SystemExit(f"refusing to benchmark: {text}")
    monitor = LoadMonitor()
    started = time.monotonic()
    step_lengths, model_lengths = SIZES[args.size]
    levels = {
        "attention step": measure(attention_steps, step_lengths, args.windows, args.repeats, args),
        "6-layer forward": measure(model_forwards, model_lengths, args.windows, args.model_repeats, args),
        "training step": measure(training_steps, model_lengths, args.windows, args.model_repeats, args),
    }
    loaded, load_text = monitor.summary(args.max_load)
    minutes = (time.monotonic() - started) / 60
    machine = f"CPU {platform.machine()} ({platform.processor() or 'unknown'}), {args.threads} threads"
    lines = [
        "# Windowed attention benchmark" + (" — LOADED MACHINE, PRELIMINARY" if loaded else ""),
        "",
        f"{machine}, torch {torch.__version__}, {str(args.dtype)[6:]}, batch 1, "
        f"{QUERY_TOKENS}-token query segment, {HEADS} heads x {HEAD_DIM} dims; "
        f"median [interquartile range] of {args.repeats} (attention step) or {args.model_repeats} (models) "
        f"interleaved rounds after {args.warmup} warm-up rounds; "
        "memory = peak allocation during one call above what was allocated before it "
        "(profiler allocator events, kernel scratch included).",
        "",
        f"{'**LOADED**: ' if loaded else 'Quiet: '}{load_text}.",
        "",
        f"Command: `python benchmarks/bench_window_attention.py --size {args.size} --repeats {args.repeats} "
        f"--model-repeats {args.model_repeats} --threads {args.threads}` ({minutes:.1f} min).",
        "",
        *target_lines(levels),
    ]
    titles = {
        "attention step": "Attention step (one layer, pattern prebuilt; flex compiled before timing)",
        "6-layer forward": f"Cross-encoder forward ({LAYERS} layers, hidden {HEADS * HEAD_DIM}, inference)",
        "training step": "Training step (forward + backward, dropout 0.1 as in BERT)",
    }
    for level, rows in levels.items():
        lines += ["", f"## {titles[level]}", "", *table(rows)]
    emit("\n".join(lines) + "\n", args.out)
    if args.readme:
        update_readme(args.readme, readme_block(levels, args.out or "stdout", loaded, minutes))


if __name__ == "__main__":
    main()
