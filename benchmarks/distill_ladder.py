"""Distil the zero-shot bi-encoder into the ladder's cross-encoders: a ladder option for
benchmarks/ladder_options.py, run with the pipeline's own training and evaluation entry points.

    python benchmarks/distill_ladder.py benchmarks/configs/ladder_distill_listkl.yaml \\
        --source results/ladder-minilm-mean-len128 --sizes L1 L2 L3 L4
    python benchmarks/distill_ladder.py benchmarks/configs/ladder_distill_listkl.yaml \\
        --source results/ladder-minilm-mean-len128 --sizes L6      # after the recipe is committed

The teacher is the overlay's checkpoint at its full depth used as the bi-encoder it was trained as
(mean pooling, cosine: :func:`bi_encoder_zero_shot.mean_pooled`); the students are the overlay's
``models`` (cross-encoders from the truncated checkpoint, as the pipeline builds them). Knowledge
distillation across architectures as in Hofstätter et al. 2020, "Improving Efficient Neural Ranking
Models with Cross-Architecture Knowledge Distillation": the teacher scores each training group once
(:func:`teacher_groups`), and its scores replace the groups' labels, so the pipeline's listwise
objective (ListNetLoss, target softmax(``listnet_label_scale`` x label)) is a listwise KL to the
teacher's softmax at temperature 1 / ``listnet_label_scale``. The overlay's own ``distill``
section (read here only) says ``label_weight`` w: w x the ICT label is added to each teacher score
(the ICT positive pushed up in the target: label and teacher mixed in one target; 0: the teacher
alone).

It reuses a finished run folder of the same collection (``--source``, read only): its data, BM25
runs, candidate texts and tokens, and BM25's evaluation are copied into the option's run folder
``results/<run_name>``; the pipeline's examples job (``python -m rerank_scaling.data.build_examples``)
builds the examples from them with the overlay's ``examples`` keys (``human_groups.parquet``: the
groups with their ICT labels, before the teacher scores them); then per size
``python -m rerank_scaling.training.train`` and ``python -m rerank_scaling.evaluation.evaluate run``
(final checkpoint, dev split), each under
``nice -n 10`` with 1 thread, as the Snakemake rules call them. Each job's wall and CPU seconds are
written as a Snakemake benchmark file (``benchmarks/<stage>/<run>.tsv``, columns ``s`` and
``cpu_time``) so that ladder_options.py reads them as it reads a Snakemake run's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from benchmark_output import REPO
from bi_encoder_zero_shot import mean_pooled
from ladder_options import merged_config

from rerank_scaling.families.paths import resolve_path
from rerank_scaling.grid import RunSpec
from rerank_scaling.settings import without
from rerank_scaling.training.train_settings import GRID_KEYS, TrainSettings

#: What the option's run folder takes from the source run folder (read only there).
COPIED = ("data", "bm25", "eval/texts", "eval/tokens", "eval/bm25")
SPLIT = "dev"


def teacher_groups(groups: pd.DataFrame, model_path: str, layers: int, max_length: int, label_weight: float):
    """``groups`` with each label replaced by the teacher's cosine similarity of (query, document)
    (+ ``label_weight`` x the original label); the original labels are kept as ``ict_labels``."""
    queries = groups["query"].tolist()
    documents = sorted({d for docs in groups["documents"] for d in docs})
    model_dir = resolve_path(model_path)
    query_vectors = mean_pooled(queries, model_dir, [layers], max_length)[layers]
    doc_vectors = mean_pooled(documents, model_dir, [layers], max_length)[layers]
    row_of = {d: i for i, d in enumerate(documents)}
    out = groups.copy()
    out["ict_labels"] = groups["labels"]
    out["labels"] = [
        doc_vectors[[row_of[d] for d in docs]] @ query_vectors[i]
        + label_weight * np.asarray(labels, dtype=float)
        for i, (docs, labels) in enumerate(zip(groups["documents"], groups["labels"], strict=True))
    ]
    return out


def timed(command: list[str], benchmark: Path, log: Path) -> None:
    """Run ``command`` (niced), its output to ``log``; write its wall and CPU seconds (user + system
    of the process and its children) as a Snakemake benchmark file."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as handle:
        process = subprocess.Popen(["nice", "-n", "10", *command], stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{command[2]} failed: see {log}")
    write_benchmark(benchmark, wall, usage.ru_utime + usage.ru_stime)


def write_benchmark(path: Path, wall_s: float, cpu_s: float) -> None:
    """A Snakemake benchmark file's columns that :func:`rerank_scaling.workflow.timing.job_times` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\tcpu_time\n{wall_s:.2f}\t{cpu_s:.2f}\n")


def prepare(source: Path, run_dir: Path, overlay: dict, config: dict) -> None:
    """The option's run folder: what it reuses of ``source``, and the teacher-scored groups."""
    for part in COPIED:
        target = run_dir / part
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (source / part).is_dir() else shutil.copy2
        copy(source / part, target)
    examples = run_dir / "examples"
    if not (examples / "pointwise.parquet").exists():  # the examples job, on the overlay's examples keys
        timed(
            [
                sys.executable,
                "-m",
                "rerank_scaling.data.build_examples",
                f"--collection={run_dir / 'data' / 'collection'}",
                "--split=train",
                f"--run={run_dir / 'bm25' / 'runs' / 'train.trec'}",
                f"--settings={json.dumps(config['examples'])}",
                f"--pointwise={examples / 'pointwise.parquet'}",
                f"--groups={examples / 'human_groups.parquet'}",
            ],
            run_dir / "benchmarks" / "examples" / "examples.tsv",
            run_dir / "logs" / "examples" / "examples.log",
        )
    groups_file = examples / "groups.parquet"
    if not groups_file.exists():
        teacher = overlay["models"][-1]  # the deepest size's checkpoint, whole: the teacher
        label_weight = float(overlay.get("distill", {}).get("label_weight", 0.0))
        import torch

        torch.set_num_threads(1)
        start, cpu = time.perf_counter(), time.process_time()
        groups = teacher_groups(
            pd.read_parquet(examples / "human_groups.parquet"),
            teacher["path"],
            int(teacher["layers"]),
            int(config["training"]["max_length"]),
            label_weight,
        )
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        write_benchmark(run_dir / "benchmarks" / "teacher" / "groups.tsv", wall_s, cpu_s)
        groups.to_parquet(groups_file)
        (run_dir / "examples" / "teacher.json").write_text(
            json.dumps(
                {
                    "teacher": f"{teacher['path']}, {teacher['layers']} layers, mean pooling, cosine",
                    "label_weight": label_weight,
                    "source": source.name,  # the run folder whose data and BM25 runs it reuses
                }
            )
        )


def train_and_evaluate(run_dir: Path, config: dict, model: dict) -> None:
    """One student: the pipeline's training job, then its evaluation of the final checkpoint on dev."""
    training = config["training"]
    (objective,) = training["objectives"]
    run = RunSpec(model["name"], objective, "full", int(training["seeds"][0])).run_id
    python = [sys.executable, "-m"]
    final = run_dir / "checkpoints" / run / f"ckpt-{int(training['checkpoints']):02d}"
    if not (final / "checkpoint.json").exists():
        timed(
            [
                *python,
                "rerank_scaling.training.train",
                f"--run={run}",
                f"--model={json.dumps(model)}",
                # as the rule passes it: not the grid keys (the run id) nor the job's resources
                f"--training={json.dumps(without(training, GRID_KEYS, TrainSettings.RESOURCE_KEYS))}",
                "--device=cpu",
                "--threads=1",
                f"--pointwise={run_dir / 'examples' / 'pointwise.parquet'}",
                f"--groups={run_dir / 'examples' / 'groups.parquet'}",
                f"--corpus={run_dir / 'data' / 'collection' / 'corpus.jsonl'}",
                f"--checkpoints={run_dir / 'checkpoints' / run}",
                f"--work={run_dir / 'work' / 'train' / run}",
            ],
            run_dir / "benchmarks" / "train" / f"{run}.tsv",
            run_dir / "logs" / "train" / f"{run}.log",
        )
    metrics = run_dir / "eval" / run / "metrics.parquet"
    if not metrics.exists():
        timed(
            [
                *python,
                "rerank_scaling.evaluation.evaluate",
                "run",
                f"--checkpoints={final}",
                f"--collection={run_dir / 'data' / 'collection'}",
                f"--bm25-dir={run_dir / 'bm25' / 'runs'}",
                "--splits",
                SPLIT,
                f"--settings={json.dumps(config['evaluation'])}",
                f"--texts-dir={run_dir / 'eval' / 'texts'}",
                f"--tokens-dir={run_dir / 'eval' / 'tokens' / model['name']}",
                f"--max-length={int(training['max_length'])}",
                "--device=cpu",
                "--threads=1",
                f"--work={run_dir / 'work' / 'eval' / run}",
                f"--out={metrics}",
                f"--per-query={metrics.with_name('per_query.parquet')}",
            ],
            run_dir / "benchmarks" / "eval" / f"{run}.tsv",
            run_dir / "logs" / "eval" / f"{run}.log",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overlay", type=Path, help="benchmarks/configs/ladder_distill_*.yaml")
    parser.add_argument("--source", type=Path, required=True, help="a finished run folder of the collection")
    parser.add_argument("--results", type=Path, default=REPO / "results", help="where run folders are")
    parser.add_argument("--sizes", nargs="+", required=True, help="models[] names to train, in order")
    args = parser.parse_args()
    overlay = yaml.safe_load(args.overlay.read_text())
    config = merged_config(overlay)
    run_dir = args.results / overlay["run_name"]
    prepare(args.source, run_dir, overlay, config)
    models = {m["name"]: m for m in overlay["models"]}
    for name in args.sizes:
        train_and_evaluate(run_dir, config, models[name])
        print(f"{name}: done", flush=True)


if __name__ == "__main__":
    main()
