"""The collection's files are inputs of the DAG: Snakemake's own plan after editing each one, and
the metrics after a qrels fix equal a from-scratch run's (issue 26, point 1).

A local collection (the tiny builtin one, written out) runs through a small grid (L1 fitted, L2
held out, pointwise, full attention) to completion; each test then edits one file and asks
Snakemake what it would run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, job_table, snakemake_command, workflow_env

pytestmark = pytest.mark.slow

# What evaluating one split again costs: its qrels job, the checks, BM25's evaluation, both
# models' tokenized pairs of the split (they read its qrels for max_queries), every run's evaluation,
# and what follows.
REEVALUATE = {
    "prepare_qrels": 1,
    "prepare_data": 1,
    "evaluate_bm25": 1,
    "split_tokens": 2,
    "evaluate_run": 2,
    "merge_metrics": 1,
    "fit_laws": 1,
    "report_figures": 1,
    "report_answer": 1,
    "plan": 1,
    "advise_next": 1,
}


def local_collection(root: Path) -> Path:
    """The tiny config's builtin collection, written out as a local one."""
    from rerank_scaling.data import prepare_data

    section = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())["dataset"]
    prepare_data.main(["--dataset", json.dumps(section), "--out", str(root)])
    return root


def workflow_copy(workdir: Path, collection: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    copy_workflow(workdir)
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["dataset"] = {
        "name": "local-tiny",
        "source": "local",
        "train_split": "train",
        "eval_splits": ["dev", "test"],
        "local": {"path": str(collection)},
    }
    config["training"].update(objectives=["pointwise"], attention=["full"])
    (workdir / "local.yaml").write_text(yaml.safe_dump(config))
    return workdir


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    command = snakemake_command(workdir, "local.yaml", "--cores", "2", *args)
    env = {**workflow_env(), "PYTHONPATH": str(workdir / "src")}
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env)


def completed(workdir: Path, *targets: str) -> Path:
    result = snakemake(workdir, *targets)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return workdir


def planned_jobs(workdir: Path) -> Counter:
    """Rule -> number of jobs Snakemake would run now (its dry run's summary table)."""
    result = snakemake(workdir, "-n", "--quiet", "rules")
    assert result.returncode == 0, result.stderr[-3000:]
    return job_table(result.stdout + result.stderr)


@contextlib.contextmanager
def edited(path: Path, text: str) -> Iterator[None]:
    """``path`` holding ``text``, then its old bytes again (a new mtime both times)."""
    old = path.read_bytes()
    path.write_text(text)
    try:
        yield
    finally:
        path.write_bytes(old)


def fix_grades(path: Path) -> str:
    """The qrels with their first three judgements set to grade 0 (a 'fix' that changes metrics)."""
    lines = path.read_text().splitlines()
    return "".join(f"{line.rsplit(' ', 1)[0]} 0\n" if i < 3 else f"{line}\n" for i, line in enumerate(lines))


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    return local_collection(tmp_path_factory.mktemp("collection") / "local")


@pytest.fixture(scope="module")
def workflow(module_dir, collection) -> Path:
    return completed(workflow_copy(module_dir / "workflow", collection))


def test_identical_bytes_rewritten_rerun_nothing(workflow, collection):
    for path in sorted(collection.rglob("*.*")):
        path.write_bytes(path.read_bytes())  # a new mtime, the same content
    assert planned_jobs(workflow) == Counter()


def test_a_dev_qrels_fix_reevaluates_and_refits_and_trains_nothing(workflow, collection):
    qrels = collection / "qrels" / "dev.txt"
    with edited(qrels, fix_grades(qrels)):
        assert planned_jobs(workflow) == Counter(REEVALUATE)
    assert planned_jobs(workflow) == Counter(), "the old bytes back: the old digest, nothing to do"


def test_train_qrels_or_corpus_edits_rebuild_examples_and_retrain(workflow, collection):
    qrels = collection / "qrels" / "train.txt"
    with edited(qrels, fix_grades(qrels)):
        jobs = planned_jobs(workflow)
    assert jobs["prepare_qrels"] == 1 and jobs["training_examples"] == 1 and jobs["train"] == 2, jobs
    assert "bm25_index" not in jobs and "evaluate_bm25" not in jobs, jobs  # dev and test are unchanged
    corpus = collection / "corpus.jsonl"
    with edited(corpus, corpus.read_text() + json.dumps({"id": "extra", "contents": "one more"}) + "\n"):
        jobs = planned_jobs(workflow)
    assert jobs["prepare_corpus"] == 1 and jobs["bm25_index"] == 1 and jobs["train"] == 2, jobs
    assert jobs["prepare_qrels"] == 3, "the qrels are checked against the corpus's ids"


def test_metrics_after_a_dev_qrels_fix_equal_a_from_scratch_run(workflow, collection, tmp_path):
    """The acceptance test: every row of metrics/all.csv after the re-run is a fresh run's."""
    before = pd.read_csv(workflow / "results" / "tiny" / "metrics" / "all.csv")
    qrels = collection / "qrels" / "dev.txt"
    with edited(qrels, fix_grades(qrels)):
        completed(workflow)
        rerun = pd.read_csv(workflow / "results" / "tiny" / "metrics" / "all.csv")
        fresh_collection = shutil.copytree(collection, tmp_path / "fresh-collection")
        # only what the comparison reads: the fresh run's fits, plans and report are not compared
        fresh = completed(workflow_copy(tmp_path / "fresh", fresh_collection), "results/tiny/metrics/all.csv")
        scratch = pd.read_csv(fresh / "results" / "tiny" / "metrics" / "all.csv")
    keys = ["run", "checkpoint", "split", "metric"]
    changed = before.merge(rerun, on=keys).query("split == 'dev' and value_x != value_y")
    assert {"bm25", "L1__pointwise__full__s13"} <= set(changed["run"]), "the fix changes dev metrics"
    pd.testing.assert_frame_equal(
        rerun.sort_values(keys).reset_index(drop=True), scratch.sort_values(keys).reset_index(drop=True)
    )


def test_a_corpus_edit_reruns_the_duplicate_check(workflow, collection):
    """Last: it leaves the workflow with a failed corpus job."""
    corpus = collection / "corpus.jsonl"
    first = corpus.read_text().splitlines()[0]
    with edited(corpus, corpus.read_text() + first + "\n"):
        result = snakemake(workflow)
    lines = len(corpus.read_text().splitlines()) + 1
    log = (workflow / "results" / "tiny" / "logs" / "data" / "corpus.log").read_text()
    assert result.returncode != 0 and f"corpus.jsonl:{lines}: duplicate document id" in log, log[-2000:]


@pytest.mark.parametrize(
    ("file", "edit", "log", "message"),
    [
        (
            "queries/dev.tsv",
            lambda line, i: line.split("\t")[0] + "\t " if i == 1 else line,
            "queries_dev",
            "queries/dev.tsv:2: query",
        ),
        (
            "qrels/dev.txt",
            lambda line, i: line.rsplit(" ", 1)[0] + " 0",
            "qrels_dev",
            "split 'dev' has no judgement with grade >= evaluation.relevance_threshold = 1",
        ),
    ],
    ids=["whitespace-dev-query", "dev-all-grade-0"],
)
def test_bad_dev_data_stop_the_workflow_before_any_training_job(
    collection, tmp_path, file, edit, log, message
):
    """The dev split's checks run first (their priority), though training does not read dev."""
    local = shutil.copytree(collection, tmp_path / "local")
    lines = (local / file).read_text().splitlines()
    (local / file).write_text("".join(f"{edit(line, i)}\n" for i, line in enumerate(lines)))
    workdir = workflow_copy(tmp_path / "w", local)
    result = snakemake(workdir)
    text = (workdir / "results" / "tiny" / "logs" / "data" / f"{log}.log").read_text()
    assert result.returncode != 0 and f"{local / file}" in text and message in text, text[-2000:]
    assert not (workdir / "results" / "tiny" / "logs" / "train").exists()
