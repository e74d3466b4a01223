"""What a training checkpoint costs besides the trainer's state: the model card and the export.

At each checkpoint the trainer saves its state (``CrossEncoderTrainer._save``: weights, tokenizer,
and, unless turned off, sentence-transformers' generated model card, which renders a template and
runs the model on example pairs), then the run store exports the state's model files
(``RunStore.export``: a copy of each, or a hard link since ``link_or_copy``) and publishes a copy.
This times the two changed parts, old way against new, on the default's ladder sizes in one run:
``_save`` with and without the card (``model_saves.without_model_card``), and the export by copies
(``shutil.copy2``, as before) and by links, in interleaved rounds (shuffled), medians (min-max).

python benchmarks/bench_checkpoint_save.py --out benchmarks/results/checkpoint_save_zen3.md
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
from benchmark_output import REPO, commit, emit
from datasets import Dataset
from interleaved import interleaved_times, span

from rerank_scaling.compute.cpu_profiles import cpu_kind
from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.precision import cpu_name
from rerank_scaling.training.checkpoint_store import link_or_copy, place_model_files
from rerank_scaling.training.model_saves import without_model_card

CONFIG = REPO / "config.yaml"


def trainer_of(model, output_dir: Path):
    """A CrossEncoderTrainer over ``model`` as training builds one (its model card data filled in
    from the trainer and a dataset), used here only to save."""
    from sentence_transformers.cross_encoder import (
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
        losses,
    )

    data = Dataset.from_dict({"query": ["q"] * 8, "passage": ["a passage"] * 8, "label": [1.0, 0.0] * 4})
    args = CrossEncoderTrainingArguments(output_dir=str(output_dir), report_to="none", use_cpu=True)
    return CrossEncoderTrainer(
        model=model, args=args, train_dataset=data, loss=losses.BinaryCrossEntropyLoss(model)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["L1", "L6"], help="config.yaml's models")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()[0]
    config = yaml.safe_load(CONFIG.read_text())
    torch.set_num_threads(config["training"]["threads"])
    scratch = Path(tempfile.mkdtemp(prefix="bench-checkpoint-save-"))
    names = itertools.count()
    cells, weights = {}, {}
    try:
        for spec in (m for m in config["models"] if m["name"] in args.sizes):
            name = spec["name"]
            model = build_cross_encoder(spec, config["training"]["max_length"], 0)
            trainer = trainer_of(model, scratch / f"{name}-trainer")
            state = scratch / f"{name}-state"
            trainer._save(str(state))
            weights[name] = (state / "model.safetensors").stat().st_size

            def save(card: bool, trainer=trainer, model=model, name=name) -> None:
                if not card:
                    without_model_card(model)
                try:
                    trainer._save(str(scratch / f"{name}-save-{next(names)}"))
                finally:
                    vars(model).pop("save_pretrained", None)  # the class's method again

            def export(place, state=state, name=name) -> None:
                target = scratch / f"{name}-export-{next(names)}"
                target.mkdir()
                place_model_files(state, target, place)  # RunStore.export's loop, no sidecar

            cells[(name, "save", "with card")] = lambda save=save: save(True)
            cells[(name, "save", "without card")] = lambda save=save: save(False)
            cells[(name, "export", "copies")] = lambda export=export: export(shutil.copy2)
            cells[(name, "export", "links")] = lambda export=export: export(link_or_copy)
        seconds = interleaved_times(cells, args.repeats, shuffle=1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    median = {cell: statistics.median(values) for cell, values in seconds.items()}
    lines = [
        "# Checkpoint costs: the model card and the export",
        "",
        f"`python benchmarks/bench_checkpoint_save.py` at commit {commit()} on **{cpu_name()}** (kind "
        f"`{cpu_kind()}`), {os.cpu_count()} CPUs, torch {torch.__version__}; load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run time "
        f"{(time.time() - started) / 60:.1f} min; {args.repeats} interleaved repeats (shuffled), one "
        f"warm-up round; files under {tempfile.gettempdir()} (the page cache absorbs the writes).",
        "",
        "Save: `CrossEncoderTrainer._save` of the model (weights, tokenizer, training arguments), with "
        "sentence-transformers' generated model card (before) and without it (`without_model_card`, "
        "now). Export: the state's model files into an export folder by copies (before) and by hard "
        "links (`link_or_copy`, now). Cells: median ms (min-max); saved: the median's difference.",
        "",
        "| model | weights MB | save with card | save without card | saved ms | export by copies "
        "| export by links | saved ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in weights:
        cells_ms = []
        for step, before, now in (("save", "with card", "without card"), ("export", "copies", "links")):
            old, new = (name, step, before), (name, step, now)
            saved = (median[old] - median[new]) * 1e3
            cells_ms += [span(seconds[old], digits=0), span(seconds[new], digits=0), f"{saved:.0f}"]
        lines.append(f"| {name} | {weights[name] / 1e6:.0f} | " + " | ".join(cells_ms) + " |")
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
