"""What a run's checkpoints cost to write, with the frozen embeddings saved whole or apart.

One cell is one training run's checkpoint sequence as the trainer's ``on_save`` takes it, K times:
``CrossEncoderTrainer._save`` into a new trainer state, the state's file records, the export
(links), the state marked complete (older states removed) and the published copy, with the
trainable weights changed between checkpoints. "whole": the weights saved in one
``model.safetensors`` (before); "frozen apart": ``model_saves.save_frozen_apart`` (now), which
writes the frozen shard once and links it at later checkpoints, and publishing links it too. Each
cell reports its wall seconds, its CPU seconds (user + system of this process: the kernel's copying
of written bytes is charged to the writer) and the bytes it passed to ``write`` (``wchar`` of
/proc/self/io), medians (min-max) of interleaved, shuffled repeats.

python benchmarks/bench_checkpoint_writes.py --out benchmarks/results/checkpoint_writes_zen3.md
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml
from bench_checkpoint_save import trainer_of
from benchmark_output import REPO, commit, emit
from interleaved import interleaved_times, span

from rerank_scaling.compute.cpu_profiles import cpu_kind
from rerank_scaling.families.models import build_cross_encoder, freeze_input_embeddings
from rerank_scaling.precision import cpu_name
from rerank_scaling.training.checkpoint_store import RunStore, file_records
from rerank_scaling.training.model_saves import save_frozen_apart, without_model_card

CONFIG = REPO / "config.yaml"
VARIANTS = ("whole", "frozen apart")


def written_bytes() -> int:
    """Bytes this process has passed to ``write`` and its kin so far (``wchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar")


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def checkpoint_run(model, trainer, root: Path, checkpoints: int) -> None:
    """``checkpoints`` checkpoints of one run into a fresh store under ``root``, as ``on_save``."""
    store = RunStore(root / "work", root / "ckpts")
    store.prepare({"run": root.name})
    trainable = [p for p in model.model.parameters() if p.requires_grad]
    for index in range(1, checkpoints + 1):
        with torch.no_grad():
            for parameter in trainable:  # a training step's change, so the trained shard differs
                parameter.add_(1e-3)
        state = store.trainer_dir / f"checkpoint-{index}"
        trainer._save(str(state))
        records = file_records(state)
        store.export(state, index, {"step": index}, records)
        store.complete_state(state, {"step": index}, records)
        store.publish(index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["L1", "L6"], help="config.yaml's models")
    parser.add_argument("--checkpoints", type=int, default=None, help="default: config.yaml's")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()[0]
    config = yaml.safe_load(CONFIG.read_text())
    checkpoints = args.checkpoints or config["training"]["checkpoints"]
    torch.set_num_threads(config["training"]["threads"])
    scratch = Path(tempfile.mkdtemp(prefix="bench-checkpoint-writes-"))
    names = itertools.count()
    cells, costs, weights = {}, {}, {}
    try:
        for spec in (m for m in config["models"] if m["name"] in args.sizes):
            for variant in VARIANTS:
                model = build_cross_encoder(spec, config["training"]["max_length"], 0)
                freeze_input_embeddings(model)
                if variant == "frozen apart":
                    save_frozen_apart(model.model)
                without_model_card(model)
                trainer = trainer_of(model, scratch / "trainer")
                weights[spec["name"]] = sum(p.numel() * p.element_size() for p in model.model.parameters())
                cell = (spec["name"], variant)
                costs[cell] = []

                def run(model=model, trainer=trainer, cell=cell) -> None:
                    root = scratch / f"run-{next(names)}"
                    cpu, written = cpu_seconds(), written_bytes()
                    try:
                        checkpoint_run(model, trainer, root, checkpoints)
                        costs[cell].append((cpu_seconds() - cpu, written_bytes() - written))
                    finally:
                        shutil.rmtree(root, ignore_errors=True)

                cells[cell] = run
        seconds = interleaved_times(cells, args.repeats, shuffle=1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    timed = {cell: values[-args.repeats :] for cell, values in costs.items()}  # not the warm-up's
    lines = [
        "# Checkpoint writes: frozen embeddings saved whole or apart",
        "",
        f"`python benchmarks/bench_checkpoint_writes.py` at commit {commit()} on **{cpu_name()}** (kind "
        f"`{cpu_kind()}`), {os.cpu_count()} CPUs, torch {torch.__version__}; load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run time "
        f"{(time.time() - started) / 60:.1f} min; {args.repeats} interleaved repeats (shuffled), one "
        f"warm-up round; files under {tempfile.gettempdir()}, removed after each cell (the page "
        "cache then reuses its pages: writing costs less than where a workflow keeps its "
        "checkpoints, `bench_dag_ab.py`).",
        "",
        f"A cell: one run's {checkpoints} checkpoints (config.yaml's `training.checkpoints`), each saved, "
        "recorded, exported, completed and published as training does, input embeddings frozen "
        "(`training.freeze_embeddings`). Seconds and CPU seconds: median (min-max) per run; "
        "MB written: median of the bytes passed to `write`.",
        "",
        "| model | weights MB | saved | seconds | CPU seconds | MB written |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for cell in cells:
        name, variant = cell
        cpu = [value for value, _ in timed[cell]]
        written = statistics.median(value for _, value in timed[cell])
        lines.append(
            f"| {name} | {weights[name] / 1e6:.0f} | {variant} | {span(seconds[cell], 1, 2)} | "
            f"{span(cpu, 1, 2)} | {written / 1e6:.0f} |"
        )
    lines += [
        "",
        "| model | whole / frozen apart: seconds | CPU seconds | MB written |",
        "|---|---:|---:|---:|",
    ]
    for name in weights:
        whole, apart = (name, "whole"), (name, "frozen apart")
        ratios = [
            statistics.median(seconds[whole]) / statistics.median(seconds[apart]),
            statistics.median(v for v, _ in timed[whole]) / statistics.median(v for v, _ in timed[apart]),
            statistics.median(v for _, v in timed[whole]) / statistics.median(v for _, v in timed[apart]),
        ]
        lines.append(f"| {name} | " + " | ".join(f"{ratio:.2f}x" for ratio in ratios) + " |")
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
