"""Thread layout per CPU kind: two 1-thread jobs side by side against one 2-thread job, for the
default's evaluation and training, measured in one run with interleaved repeats.

    python benchmarks/bench_thread_layout.py --out benchmarks/results/thread_layout_zen3.md

``config.yaml`` runs every model job on one thread (``training.threads``, ``evaluation.threads``),
so that Snakemake's ``--cores 2`` runs two jobs at once. The other layout on 2 cores is one job at
a time on both. Which gives more work per second depends on how well a job's GEMMs use a second
thread at the default's small shapes (16 pairs of 48 tokens), and so on the CPU kind.

Each cell runs its layout's processes for ``--seconds`` of wall time, after a warm-up:
- **2 x 1**: two processes with one thread each;
- **1 x 2**: one process with two threads.

It counts what they finished. For training these are pointwise steps, as
:func:`bench_eval_batch.training_load` takes them (forward, BCE, backward, AdamW, the embeddings
frozen). For evaluation these are the pairs of the default's dev split, scored batch by batch in
fp32 at the kind's measured batch size (:func:`evaluation_load`). Work per second is summed over a
cell's processes; the table gives medians (min-max) over the repeats, and the ratio of the medians.
The fp32 pass is what runs on a CPU without bf16 units. Where the CPU has them, the evaluation
scores in bf16 and rescores near ties in fp32, and this pass is only part of its work.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import time
from pathlib import Path

import torch
import yaml
from bench_eval_batch import training_load, workload
from benchmark_output import commit, emit
from interleaved import span

from rerank_scaling.compute.cpu_profiles import cpu_kind, eval_batch_size
from rerank_scaling.evaluation.rerank import model_scores, tokenize_pairs
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.precision import cpu_name

CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"
LAYOUTS = {"2 x 1": (2, 1), "1 x 2": (1, 2)}  # processes x threads each


def evaluation_load(spec: dict, config: dict, ready, stop, pairs_done) -> None:
    """An evaluation job's scoring, until ``stop`` is set: the dev split's pairs scored in fp32 by
    ``spec``'s cross-encoder, one batch at a time (``evaluation.threads`` threads), round and round.
    ``pairs_done`` (a shared counter) counts the pairs scored."""
    torch.set_num_threads(config["evaluation"]["threads"])
    max_length = config["training"]["max_length"]
    model = build_cross_encoder(spec, max_length, 0).eval()
    pairs, queries, texts = workload(config)
    tokens = tokenize_pairs(model.tokenizer, pairs, queries, texts, max_length)
    pad = model.tokenizer.pad_token_id or 0
    batch = eval_batch_size("auto", "cpu")
    batches = [list(range(start, min(start + batch, len(pairs)))) for start in range(0, len(pairs), batch)]
    ready.set()
    while not stop.is_set():
        for indices in batches:
            model_scores(model, tokens.select(indices), batch, pad, "cpu")
            pairs_done.value += len(indices)
            if stop.is_set():
                break


LOADS = {"evaluation": evaluation_load, "training": training_load}


class UnitCounter:
    """A shared count of finished units (``.value``, what the loads increment) that also records when
    the last one finished (system-wide monotonic clock), so that a rate is whole units over the time
    they took, not units finished in a window, which is off by up to one unit per process."""

    def __init__(self, context) -> None:
        self.count, self.at = context.Value("q", 0), context.Value("d", time.monotonic())

    @property
    def value(self) -> int:
        return self.count.value

    @value.setter
    def value(self, count: int) -> None:
        self.at.value = time.monotonic()
        self.count.value = count

    def read(self) -> tuple[int, float]:
        """(units finished, when the last one finished)."""
        return self.count.value, self.at.value


def cell_rate(load: str, spec: dict, config: dict, layout: str, seconds: float, warm_up: float) -> float:
    """Work per second of ``layout``'s processes running ``load`` together for about ``seconds``,
    after ``warm_up`` seconds of the same work (one-off allocations, kernel selection): the sum of
    each process's rate over the whole units it finished in that time (:class:`UnitCounter`)."""
    processes, threads = LAYOUTS[layout]
    section = "evaluation" if load == "evaluation" else "training"
    config = {**config, section: {**config[section], "threads": threads}}
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    readies = [context.Event() for _ in range(processes)]
    counters = [UnitCounter(context) for _ in range(processes)]
    workers = [
        context.Process(target=LOADS[load], args=(spec, config, ready, stop, counter), daemon=True)
        for ready, counter in zip(readies, counters, strict=True)
    ]
    for worker in workers:
        worker.start()
    try:
        for ready in readies:
            if not ready.wait(300):
                raise SystemExit(f"{load} {spec['name']} {layout}: a process did not start within 300 s")
        time.sleep(warm_up)
        before = [counter.read() for counter in counters]
        time.sleep(seconds)
        after = [counter.read() for counter in counters]
        deadline = time.monotonic() + 300
        while any(a[0] == b[0] for a, b in zip(after, before, strict=True)):  # a unit longer than the window
            if time.monotonic() > deadline:
                raise SystemExit(f"{load} {spec['name']} {layout}: no unit finished in {seconds + 300:g} s")
            time.sleep(0.1)
            after = [counter.read() for counter in counters]
    finally:
        stop.set()
        for worker in workers:
            worker.join(120)
    if any(worker.exitcode != 0 for worker in workers):
        codes = [worker.exitcode for worker in workers]
        raise SystemExit(f"{load} {spec['name']} {layout}: its processes exited with {codes}")
    # each process's whole units between its last finish before the window and its last inside it
    return sum((a[0] - b[0]) / (a[1] - b[1]) for a, b in zip(after, before, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["L2", "L6"], help="config.yaml's models")
    parser.add_argument("--loads", nargs="+", default=list(LOADS), choices=list(LOADS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="timed wall seconds per cell")
    parser.add_argument("--warm-up", type=float, default=5.0, help="seconds of the same work before timing")
    parser.add_argument("--seed", type=int, default=0, help="of the shuffled order")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    config = yaml.safe_load(CONFIG.read_text())
    specs = {m["name"]: m for m in config["models"] if m["name"] in args.sizes}
    cells = [(load, name, layout) for load in args.loads for name in specs for layout in LAYOUTS]
    started, load_before = time.monotonic(), os.getloadavg()[0]
    order = random.Random(args.seed)
    rates: dict[tuple[str, str, str], list[float]] = {cell: [] for cell in cells}
    for repeat in range(args.repeats):
        for cell in order.sample(cells, len(cells)):
            load, name, layout = cell
            rates[cell].append(cell_rate(load, specs[name], config, layout, args.seconds, args.warm_up))
            print(f"repeat {repeat + 1}: {cell} {rates[cell][-1]:.2f}/s", flush=True)
    load_after, minutes = os.getloadavg()[0], (time.monotonic() - started) / 60
    units = {"evaluation": "pairs/s", "training": "steps/s"}
    lines = [
        "# Thread layout on this CPU: two 1-thread jobs against one 2-thread job",
        "",
        f"`python benchmarks/bench_thread_layout.py` at commit {commit()} on **{cpu_name()}** (kind "
        f"`{cpu_kind()}`), {os.cpu_count()} CPUs, torch {torch.__version__}; {args.repeats} interleaved "
        f"repeats of {args.seconds:g} s per cell after {args.warm_up:g} s of warm-up; load average "
        f"{load_before:.2f} before, {load_after:.2f} after; run time {minutes:.1f} min.",
        "",
        "Evaluation: the default's dev split scored in fp32, batch by batch at the kind's batch size "
        f"({eval_batch_size('auto', 'cpu')}); training: pointwise steps of "
        f"{config['training']['pointwise_batch_size']} pairs, fp32, embeddings frozen; "
        f"{config['training']['max_length']} tokens. Work per second summed over a layout's "
        "processes: median (min-max).",
        "",
        "| load | size | 2 x 1 (two 1-thread jobs) | 1 x 2 (one 2-thread job) | 2 x 1 / 1 x 2 |",
        "|---|---|---:|---:|---:|",
    ]
    for load in args.loads:
        for name in specs:
            two, one = rates[(load, name, "2 x 1")], rates[(load, name, "1 x 2")]
            ratio = statistics.median(two) / statistics.median(one)
            cells = f"{span(two, scale=1)} | {span(one, scale=1)} | {ratio:.2f}x"
            lines.append(f"| {load} ({units[load]}) | {name} | {cells} |")
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
