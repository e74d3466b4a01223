"""Expected GPU-hours of the paper grid (config.paper.yaml) per stage, from the planning cost model.

    python scripts/paper_grid_cost.py [--configfile config.paper.yaml] \
        [--out benchmarks/results/paper_grid_cost.md]

Inputs, all named in the output:
* job counts: Snakemake's own dry run (``snakemake -n --configfile ...``);
* model shapes: each model's ``config.json`` from the Hugging Face cache (after
  ``./run.sh --prefetch``), else the Ettin architecture table below (the Ettin paper's sizes),
  turned into :class:`rerank_scaling.planning.encoder_flops.EncoderShape` (gated FFN, local-attention layers);
* query and judgement counts: ir_datasets' bundled metadata (no download);
* FLOPs: :meth:`EncoderShape.train_flops` / ``forward_flops`` at ``training.max_length`` tokens
  per sequence (an upper bound: batches are padded to their longest pair only);
* throughput: ``planning.peak_flops x planning.mfu`` on ``planning.gpu_name``.

Training examples per run: one example (pointwise: 1 positive + n negatives; groups: 1 + n
documents) per judged positive of the ``train`` split's sampled queries, as
:mod:`rerank_scaling.data.training_examples` builds them; evaluation: every checkpoint reranks
``evaluation.rerank_depth`` candidates of every (sub-sampled) evaluation query.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from rerank_scaling.grid import Grid  # noqa: E402
from rerank_scaling.hub.cache import cached_model, is_hub_id  # noqa: E402
from rerank_scaling.planning.encoder_flops import EncoderShape  # noqa: E402
from rerank_scaling.planning.memory import ETTIN  # noqa: E402  (the Ettin paper's shapes)
from rerank_scaling.workflow.load import validate_config  # noqa: E402


def merged_config(configfile: Path) -> dict[str, Any]:
    """config.yaml with ``configfile`` merged over it, as Snakemake's --configfile does, validated
    and with the schema's defaults (rerank_scaling.workflow.load.validate_config), as the workflow sees it."""

    def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in over.items():
            out[key] = (
                merge(out[key], value)
                if isinstance(value, dict) and isinstance(out.get(key), dict)
                else value
            )
        return out

    merged = merge(yaml.safe_load((REPO / "config.yaml").read_text()), yaml.safe_load(configfile.read_text()))
    return validate_config(merged)


def dry_run_jobs(configfile: Path) -> dict[str, int]:
    """Rule -> jobs of ``snakemake -n --configfile`` (the whole DAG, nothing run)."""
    command = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(configfile)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    table = re.search(r"job\s+count\n-+\s+-+\n(.*?)\ntotal", result.stdout + result.stderr, re.S)
    if result.returncode != 0 or table is None:
        raise SystemExit(f"snakemake -n failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return {name: int(count) for name, count in (line.split() for line in table.group(1).splitlines())}


def model_shape(spec: dict[str, Any]) -> tuple[EncoderShape, str]:
    """The shape of a models[] entry and where it came from."""
    from transformers import AutoConfig, ModernBertConfig

    head = spec["head"]
    path = spec["path"]
    snapshot = cached_model(path) if is_hub_id(path) else Path(path)
    if snapshot is not None and (snapshot / "config.json").exists():
        return EncoderShape.from_hf_config(AutoConfig.from_pretrained(str(snapshot)), head), "config.json"
    if path not in ETTIN:
        raise SystemExit(
            f"{path}: no config.json in the cache; run ./run.sh --prefetch --configfile ... first"
        )
    hidden, layers, ffn = ETTIN[path]
    config = ModernBertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=ffn,
        num_attention_heads=max(hidden // 64, 1),
        global_attn_every_n_layers=3,
        local_attention=128,
    )
    return EncoderShape.from_hf_config(config, head), "Ettin table (not prefetched)"


def split_counts(config: dict[str, Any]) -> tuple[dict[str, int], float]:
    """Queries per evaluation split (after evaluation.max_queries) and positives per train query."""
    import ir_datasets

    section = config["dataset"]["ir_datasets"]
    limits = config["evaluation"]["max_queries"] or {}  # the schema's default is null: all queries
    counts = {}
    for split in config["dataset"]["eval_splits"]:
        total = ir_datasets.load(section["splits"][split]).queries_count()
        counts[split] = min(total, limits.get(split) or total)
    train = ir_datasets.load(section["splits"][config["dataset"]["train_split"]])
    train_queries = min(train.queries_count(), section["max_queries"].get("train") or 10**12)
    return counts, train_queries * train.qrels_count() / train.queries_count()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configfile", default="config.paper.yaml")
    parser.add_argument("--out", default="benchmarks/results/paper_grid_cost.md")
    args = parser.parse_args(argv)
    configfile = REPO / args.configfile
    config = merged_config(configfile)
    planning = config["planning"]
    if not planning["peak_flops"] or not planning["gpu_name"]:
        raise SystemExit(f"{args.configfile}: set planning.gpu_name and planning.peak_flops (FLOP/s)")
    rate = float(planning["peak_flops"]) * float(planning["mfu"])
    jobs = dry_run_jobs(configfile)
    grid = Grid.from_config(config)
    training, evaluation = config["training"], config["evaluation"]
    examples = config["examples"]
    seq = int(training["max_length"])
    split_queries, positives = split_counts(config)
    pairs_per_checkpoint = sum(split_queries.values()) * int(evaluation["rerank_depth"])
    checkpoints = len(grid.checkpoint_indices())
    unit = evaluation["unit"]
    per_job = {"run": 1, "checkpoint": checkpoints, "checkpoint_split": checkpoints * len(split_queries)}[
        unit
    ]
    sequences = {
        "pointwise": positives * (1 + int(examples["pointwise_negatives"])),
        "pairwise": positives * (1 + int(examples["group_negatives"])),
        "listwise": positives * (1 + int(examples["group_negatives"])),
    }
    runs_per_model: dict[str, list[str]] = {}
    for run in grid.run_ids():
        runs_per_model.setdefault(run.split("__")[0], []).append(run.split("__")[1])
    rows, totals = [], {"train": 0.0, "evaluate": 0.0}
    for spec in config["models"]:
        shape, source = model_shape(spec)
        objectives = runs_per_model.get(spec["name"], [])
        train_h = (
            sum(sequences[o] * shape.train_flops(seq) for o in objectives) * training["epochs"] / rate / 3600
        )
        eval_run_h = checkpoints * pairs_per_checkpoint * shape.forward_flops(seq) / rate / 3600
        eval_h = eval_run_h * len(objectives)
        totals["train"] += train_h
        totals["evaluate"] += eval_h
        job_minutes = eval_run_h / per_job * 60
        rows.append(
            f"| {spec['name']} | {shape.matrix_params / 1e6:.1f} | {shape.local_layers}/{shape.layers} "
            f"| {source} | {len(objectives)} | {train_h:.1f} | {eval_h:.1f} | {job_minutes:.1f} |"
        )
    lines = [
        "# Paper grid: expected GPU-hours per stage",
        "",
        f"Generated by `python scripts/paper_grid_cost.py --configfile {args.configfile}`.",
        f"GPU: {planning['gpu_name']}, peak {float(planning['peak_flops']):.3g} FLOP/s x MFU "
        f"{float(planning['mfu'])} = {rate:.3g} FLOP/s achieved (config `planning`).",
        f"Sequences of {seq} tokens (training.max_length, an upper bound); {checkpoints} checkpoints "
        f"per run; evaluation unit `{unit}`.",
        "",
        "## Jobs (`snakemake -n --configfile " + args.configfile + "`)",
        "",
        "| rule | jobs |",
        "|---|---|",
        *[f"| {name} | {count} |" for name, count in jobs.items() if name != "all"],
        "",
        "## Workload",
        "",
        f"- training: {positives:,.0f} judged positives of the sampled train queries; sequences per run: "
        + ", ".join(f"{o} {n:,.0f}" for o, n in sequences.items() if o in training["objectives"]),
        "- evaluation queries per checkpoint: "
        + ", ".join(f"{s} {n:,}" for s, n in split_queries.items())
        + f" (x {evaluation['rerank_depth']} candidates = {pairs_per_checkpoint:,} pairs)",
        "",
        "## GPU-hours",
        "",
        "| model | non-embedding params (M) | local/all layers | shape from | runs | train GPU-h "
        "| evaluate GPU-h | minutes per evaluation job |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        f"| **total** | | | | {sum(len(v) for v in runs_per_model.values())} | **{totals['train']:.1f}** "
        f"| **{totals['evaluate']:.1f}** | |",
        "",
        "CPU stages (prepare_data, bm25_*, training_examples, merge, fit, report) use no GPU; the plan "
        "stage profiles each model for a few steps (minutes).",
        "",
    ]
    out = REPO / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(out.read_text())


if __name__ == "__main__":
    main()
