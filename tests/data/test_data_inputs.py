"""The collection's files are inputs of the DAG: Snakemake's own plan after editing each one, and
the metrics after a qrels fix equal a from-scratch run's.

A local collection (the tiny builtin one, written out) runs through a small grid (L1 fitted, L2
held out, pointwise, full attention) to completion; each test then edits one file and asks
Snakemake what it would run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
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
    paths = sorted(collection.rglob("*.*"))
    assert len(paths) == 7  # the corpus, and each split's queries and qrels
    for path in paths:
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


def test_a_dev_queries_edit_rechecks_the_splits_and_trains_nothing(workflow, collection):
    """The splits check reads every split's queries, and no training job reads its output."""
    queries = collection / "queries" / "dev.tsv"
    lines = queries.read_text().splitlines()
    with edited(
        queries, "".join(f"{line} again\n" if i == 0 else f"{line}\n" for i, line in enumerate(lines))
    ):
        jobs = planned_jobs(workflow)
    assert jobs["prepare_queries"] == 1 and jobs["check_splits"] == 1, jobs
    assert not {"training_examples", "train", "bm25_index"} & set(jobs), jobs


def test_examples_counts_reach_the_summary_without_a_warning_on_full_data(workflow):
    """Every training query of the tiny collection gives examples: counted, and no warning."""
    counts = json.loads((workflow / "results" / "tiny" / "examples" / "counts.json").read_text())
    assert counts["queries"] == 24 and counts["without_positive"] == 0 and counts["warnings"] == [], counts
    summary = (workflow / "results" / "tiny" / "summary.md").read_text()
    assert "Training queries: 24; without a judgement" in summary and "thin training data" not in summary


def test_published_weights_are_readable_as_the_umask_allows(workflow):
    """safetensors writes weights at 0600; the published checkpoints follow the umask (read bits:
    a checkpoint may be made read-only, never unreadable to the group the umask admits)."""
    mask = os.umask(0o022)
    os.umask(mask)
    weights = sorted((workflow / "results" / "tiny" / "checkpoints").rglob("*.safetensors"))
    modes = {oct(stat.S_IMODE(path.stat().st_mode) & 0o444) for path in weights}
    assert weights and modes == {oct(0o444 & ~mask)}, (modes, weights[:2])


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


def _replace_lines(path: Path, change) -> None:
    lines = path.read_text().splitlines()
    path.write_text("".join(f"{line}\n" for line in change(lines)))


def _docid_with_space(local: Path) -> None:
    """A corpus line's id with a space (a document no qrels judge: the id alone is wrong)."""
    judged = {
        line.split()[2] for path in (local / "qrels").glob("*.txt") for line in path.read_text().splitlines()
    }
    lines = (local / "corpus.jsonl").read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if json.loads(line)["id"] not in judged)
    record = json.loads(lines[index])
    lines[index] = json.dumps({**record, "id": record["id"] + " b"})
    (local / "corpus.jsonl").write_text("\n".join(lines) + "\n")


def _dev_appended_to_train(local: Path) -> None:
    for part in ("queries/{}.tsv", "qrels/{}.txt"):
        train = local / part.format("train")
        train.write_text(train.read_text() + (local / part.format("dev")).read_text())


def _test_copied_from_dev(local: Path) -> None:
    for part in ("queries/{}.tsv", "qrels/{}.txt"):
        shutil.copyfile(local / part.format("dev"), local / part.format("test"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_docid_with_space, " b' contains whitespace; TREC run and qrels files separate fields"),
        (_dev_appended_to_train, "queries/train.tsv:25: query"),
        (_test_copied_from_dev, "queries/dev.tsv:1: query"),
    ],
    ids=["space-in-docid", "dev-appended-to-train", "test-copied-from-dev"],
)
def test_bad_ids_and_shared_queries_stop_the_workflow_before_any_training_job(
    collection, tmp_path, change, message
):
    """Each fails in a data job (naming the user's file and line) and no training job starts."""
    local = shutil.copytree(collection, tmp_path / "local")
    change(local)
    workdir = workflow_copy(tmp_path / "w", local)
    result = snakemake(workdir)
    logs = {
        path.name: path.read_text() for path in (workdir / "results" / "tiny" / "logs" / "data").glob("*.log")
    }
    failed = [text for text in logs.values() if message in text and str(local) in text]
    assert result.returncode != 0 and failed, (result.stdout + result.stderr)[-3000:]
    assert not (workdir / "results" / "tiny" / "logs" / "train").exists()


def test_thin_training_data_warns_in_the_examples_job_before_training(collection, tmp_path):
    """20 of the 24 training queries judged below examples.positive_threshold (2): the examples job,
    which runs before any training job, writes the warning to counts.json (the summary and the
    answer page show it) and to its log."""
    local = shutil.copytree(collection, tmp_path / "local")
    qrels = local / "qrels" / "train.txt"
    kept = sorted({line.split()[0] for line in qrels.read_text().splitlines()})[:4]
    _replace_lines(
        qrels,
        lambda lines: [line if line.split()[0] in kept else f"{line.rsplit(' ', 1)[0]} 1" for line in lines],
    )
    workdir = workflow_copy(tmp_path / "w", local)
    completed(workdir, "results/tiny/examples/counts.json")
    counts = json.loads((workdir / "results" / "tiny" / "examples" / "counts.json").read_text())
    assert counts["queries"] == 24 and counts["without_positive"] == 20, counts
    (warning,) = counts["warnings"]
    assert warning.startswith("thin training data (pointwise examples): 20 of 24 training queries (83%")
    assert warning in (workdir / "results" / "tiny" / "logs" / "examples" / "build.log").read_text()
    assert not (workdir / "results" / "tiny" / "logs" / "train").exists()
