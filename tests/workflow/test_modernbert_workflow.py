"""The paper's setup in miniature, through Snakemake: a tiny random ModernBERT (the Ettin
architecture; its tokenizer emits no token types) with the cls and the mean head, full and window4
attention, train -> evaluate -> fit; then evaluation one (checkpoint, split) per job, which must
merge to the same metrics from the shared cache, re-running nothing else."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, job_table, snakemake_command, workflow_env
from tiny_modernbert import save_tiny_modernbert

from rerank_scaling.evaluation.merge_metrics import merge_tables

pytestmark = pytest.mark.slow
RESULTS = "results/mb"
WINDOWED_MEAN = "mb-mean__pointwise__window4__s13"


def snakemake(workdir: Path, configfile: str, *args: str) -> subprocess.CompletedProcess:
    command = snakemake_command(workdir, configfile, "--cores", "2", *args)
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=workflow_env())


def planned_jobs(workdir: Path, configfile: str, *targets: str) -> Counter:
    result = snakemake(workdir, configfile, "-n", *targets)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return job_table(result.stdout + result.stderr)


def _config(model: Path, unit: str) -> dict:
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["run_name"] = "mb"
    config["models"] = [
        {"name": "mb-cls", "family": "hf", "path": str(model), "head": "cls", "role": "fit"},
        {"name": "mb-mean", "family": "hf", "path": str(model), "head": "mean", "role": "held_out"},
    ]
    config["training"].update(
        objectives=["pointwise"], attention=["full", "window4"], checkpoints=2, max_steps=4
    )
    config["training"]["freeze_embeddings"] = False
    config["evaluation"].update(unit=unit, max_queries={"dev": 3})
    config["fitting"].update(last_k=2, holdout_last=1)
    return config


@pytest.fixture(scope="module")
def workflow(module_dir: Path) -> Path:
    """A workflow copy that has trained, evaluated (unit: run) and fitted the ModernBERT grid."""
    workdir = copy_workflow(module_dir / "modernbert_workflow")
    model = save_tiny_modernbert(workdir / "models" / "tiny-modernbert")
    for unit in ("run", "checkpoint_split"):
        (workdir / f"mb-{unit}.yaml").write_text(yaml.safe_dump(_config(model, unit)))
    result = snakemake(workdir, "mb-run.yaml", f"{RESULTS}/laws/fits.parquet")
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return workdir


def test_modernbert_trains_evaluates_and_fits_with_both_heads_and_window4(workflow: Path) -> None:
    results = workflow / RESULTS
    metrics = pd.read_parquet(results / "metrics" / "all.parquet")
    runs = metrics[metrics["family"] == "hf"]
    assert set(runs["run"]) == {
        f"{m}__pointwise__{a}__s13" for m in ("mb-cls", "mb-mean") for a in ("full", "window4")
    }
    assert runs.groupby("run")["checkpoint"].nunique().eq(2).all()
    assert runs["value"].notna().all()
    # evaluation.max_queries: 3 of the 6 judged dev queries, all of test; BM25 on the same subset
    queries = metrics.groupby("split")["queries"].unique()
    assert list(queries["dev"]) == [3] and list(queries["test"]) == [6]
    sizes = runs.groupby("model")[["params", "non_embedding_params"]].first()
    assert (sizes["params"] > sizes["non_embedding_params"]).all()
    fits = pd.read_parquet(results / "laws" / "fits.parquet")
    assert set(fits["attention"]) == {"full", "window4"}


def test_per_checkpoint_split_jobs_merge_to_the_same_table_from_the_cache(workflow: Path) -> None:
    results = workflow / RESULTS
    reranked = sorted((results / "work" / "eval").rglob("*.trec"))
    stamps = {path: path.stat().st_mtime_ns for path in reranked}
    assert len(reranked) == 4 * 2 * 2  # runs x checkpoints x splits

    # switching the unit re-runs only the evaluation parts and the merge, nothing upstream
    target = f"{RESULTS}/metrics/all.parquet"
    assert planned_jobs(workflow, "mb-checkpoint_split.yaml", target) == Counter(
        {"evaluate_part": 16, "merge_metrics": 1}
    )
    parts = [
        f"{RESULTS}/eval/{WINDOWED_MEAN}/parts/ckpt-{k:02d}.{s}.parquet"
        for k in (1, 2)
        for s in ("dev", "test")
    ]
    result = snakemake(workflow, "mb-checkpoint_split.yaml", *parts)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    merged = merge_tables([str(workflow / part) for part in parts])
    per_run = merge_tables([str(results / "eval" / WINDOWED_MEAN / "metrics.parquet")])
    pd.testing.assert_frame_equal(merged, per_run)
    assert {path: path.stat().st_mtime_ns for path in reranked} == stamps  # all from the cache
    assert planned_jobs(workflow, "mb-checkpoint_split.yaml", target) == Counter(
        {"evaluate_part": 12, "merge_metrics": 1}
    )


def test_final_only_splits_are_evaluated_at_the_last_checkpoint_only(workflow: Path) -> None:
    """evaluation.final_only_splits: per-(checkpoint, split) jobs skip the test split before the
    last checkpoint (4 runs x (2 dev + 1 test) parts; BM25's evaluation does not re-run), and the
    evaluated table has test at the last checkpoint only."""
    config = yaml.safe_load((workflow / "mb-checkpoint_split.yaml").read_text())
    config["evaluation"]["final_only_splits"] = ["test"]
    config["fitting"]["splits"] = ["dev"]
    (workflow / "mb-final-only.yaml").write_text(yaml.safe_dump(config))
    target = f"{RESULTS}/metrics/all.parquet"
    assert planned_jobs(workflow, "mb-final-only.yaml", target) == Counter(
        {"evaluate_part": 12, "merge_metrics": 1}
    )
    config["evaluation"]["unit"] = "run"
    (workflow / "mb-final-only-run.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(workflow, "mb-final-only-run.yaml", target)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    metrics = pd.read_parquet(workflow / target)
    trained = metrics[metrics["family"] == "hf"]
    assert trained.groupby("split")["checkpoint"].unique().map(sorted).to_dict() == {
        "dev": [1, 2],
        "test": [2],
    }
