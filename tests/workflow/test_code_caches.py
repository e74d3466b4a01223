"""The workflow's own caches follow the code, and its checkpoints are verified, on Snakemake's plan
and runs over the tiny collection (one training run, to the metric table): a loss edit and a metric
edit give the metrics of a fresh run of the edited code, their undo the original ones, a docstring
edit re-runs nothing, and a truncated checkpoint is caught before evaluation and repaired from the
trainer's last verified state, not from scratch."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake_command
from test_workflow import copy_env, edited, planned_jobs, snakemake

from rerank_scaling.data.source_digests import file_sha256
from rerank_scaling.training.model_saves import FROZEN_SHARD

pytestmark = pytest.mark.slow

RUN = "L1__pointwise__full__s13"
RESULTS = Path("results") / "tiny"
TARGET = str(RESULTS / "metrics" / "all.parquet")
# The loss edit the hostile-user probe made (a weighted BCE: the one-run workflow trains pointwise,
# whose registered loss is BinaryCrossEntropyLoss), and its metric edit (nDCG's cutoff).
LOSS = ("training/objectives.py", "objective_registry.objective(objective).loss)(model)")
WEIGHTED = 'objective_registry.objective(objective).loss)(model, pos_weight=__import__("torch").tensor(5.0))'
METRIC = ("evaluation/metrics.py", "ir_measures.nDCG @ cutoff")
CUT_AT_5 = "ir_measures.nDCG @ 5"


def one_run_workflow(workdir: Path, *edits: tuple[tuple[str, str], str]) -> Path:
    """A copy of the workflow with the tiny config cut to one training run, its code edited
    (``(module, old text), new text``), run to the metric table."""
    copy_workflow(workdir)
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["models"] = config["models"][:1]
    config["training"].update(objectives=["pointwise"], attention=["full"])
    (workdir / "tiny.yaml").write_text(yaml.safe_dump(config))
    for (module, old), new in edits:
        code = workdir / "src" / "rerank_scaling" / module
        assert old in code.read_text()
        code.write_text(code.read_text().replace(old, new))
    result = snakemake(workdir, TARGET)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return workdir


def metrics(workdir: Path) -> pd.DataFrame:
    return pd.read_parquet(workdir / TARGET)


def reranked(workdir: Path) -> dict[Path, int]:
    """The evaluation's reranked run files: rewritten only where a model scored the candidates."""
    return {path: path.stat().st_mtime_ns for path in (workdir / RESULTS / "work" / "eval").rglob("*.trec")}


def train_log(workdir: Path) -> str:
    return (workdir / RESULTS / "logs" / "train" / f"{RUN}.log").read_text()


@pytest.fixture(scope="module")
def workflow(module_dir) -> Path:
    return one_run_workflow(module_dir / "workflow")


@pytest.fixture(scope="module")
def original(workflow) -> pd.DataFrame:
    return metrics(workflow)


@pytest.fixture(scope="module")
def fresh_edited(module_dir) -> pd.DataFrame:
    """The metrics of a fresh run of the code with both edits."""
    return metrics(one_run_workflow(module_dir / "fresh", (LOSS, WEIGHTED), (METRIC, CUT_AT_5)))


def test_a_docstring_edit_reruns_nothing(workflow):
    def reworded(text: str) -> str:
        return text.replace('"""', '"""A sentence added to the docstring. ', 1) + "\n# a comment\n"

    for module in (LOSS[0], METRIC[0]):
        with edited(workflow, module, reworded):
            assert planned_jobs(workflow, TARGET) == Counter()


def test_code_edits_give_a_fresh_runs_metrics_and_their_undo_the_original(workflow, original, fresh_edited):
    """The loss edit trains afresh (not resuming the old code's state) and re-evaluates; then the
    metric edit re-scores every row, BM25's and the model's, from the cached scores (no model
    scores again): the table equals a fresh run's of the edited code. The undo of both gives the
    original table back."""
    ndcg = fresh_edited["metric"] == "nDCG@10"
    changed = fresh_edited[ndcg]["value"].to_numpy() != original[ndcg]["value"].to_numpy()
    bm25 = (fresh_edited[ndcg]["run"] == "bm25").to_numpy()
    assert changed[bm25].any() and changed[~bm25].any(), "precondition: the edits change both kinds of row"

    loss, metric = (workflow / "src" / "rerank_scaling" / module for module in (LOSS[0], METRIC[0]))
    texts = {path: path.read_text() for path in (loss, metric)}
    try:
        loss.write_text(texts[loss].replace(LOSS[1], WEIGHTED))
        assert planned_jobs(workflow, TARGET) == Counter({"train": 1, "evaluate_run": 1, "merge_metrics": 1})
        result = snakemake(workflow, TARGET)
        assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
        assert "holds state of other settings, data or code: starting afresh" in train_log(workflow)
        assert "resuming from" not in train_log(workflow)
        scored = reranked(workflow)
        assert len(scored) == 5 * 2  # checkpoints x splits

        metric.write_text(texts[metric].replace(METRIC[1], CUT_AT_5))
        assert planned_jobs(workflow, TARGET) == Counter(
            {"evaluate_run": 1, "evaluate_bm25": 1, "split_tokens": 2, "merge_metrics": 1}
        )
        result = snakemake(workflow, TARGET)
        assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
        assert reranked(workflow) == scored, "the metric edit re-scores the rows, not the candidates"
        pd.testing.assert_frame_equal(metrics(workflow), fresh_edited)
    finally:
        for path, text in texts.items():
            path.write_text(text)
    result = snakemake(workflow, TARGET)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert "starting afresh" in train_log(workflow)
    pd.testing.assert_frame_equal(metrics(workflow), original)


def test_a_truncated_checkpoint_is_caught_before_evaluation_and_repaired_from_the_verified_state(
    workflow, original
):
    """`truncate -s 100000` of a published checkpoint's frozen weights, a file the run's five
    published checkpoints share (``model_saves``): Snakemake stops at parse time, naming each
    checkpoint's file and one repair; the repair, run verbatim, re-publishes the checkpoints from
    the trainer's verified copies, resuming from its last state (no step trained again), and the
    metrics are the uncorrupted run's."""
    published = RESULTS / "checkpoints" / RUN / "ckpt-03"
    weights = workflow / published / FROZEN_SHARD
    before = file_sha256(weights)
    subprocess.run(["truncate", "-s", "100000", str(weights)], check=True)
    failed = snakemake(workflow, "-n")
    assert failed.returncode != 0
    message = failed.stdout + failed.stderr
    shared = [RESULTS / "checkpoints" / RUN / f"ckpt-0{k}" for k in range(1, 6)]
    for checkpoint in shared:
        assert f"{checkpoint / FROZEN_SHARD}: 100000 bytes where" in message, message[-3000:]
    repair = re.search(r"(rm (?:\S+checkpoint\.json ?)+) and run snakemake again", message)
    assert repair and repair.group(1) == "rm " + " ".join(str(c / "checkpoint.json") for c in shared)
    subprocess.run(repair.group(1), shell=True, check=True, cwd=workflow)

    result = snakemake(workflow)  # "run snakemake again": the whole workflow, as a user does
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    log = train_log(workflow)
    assert re.search(r"resuming from \S+/trainer/checkpoint-10 \(step 10\)", log), log[:3000]
    assert "starting afresh" not in log and "checkpoint 1/5" not in log, "no step is trained again"
    assert file_sha256(weights) == before
    pd.testing.assert_frame_equal(metrics(workflow), original)


def scoring_jobs(workdir: Path) -> list[int]:
    """The live evaluation jobs (``evaluation.evaluate run``) of the workflow copy in ``workdir``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            alive = " Z " not in (proc / "stat").read_text().rpartition(")")[2][:3]
            cwd = os.readlink(proc / "cwd")
        except OSError:  # not a process, or gone
            continue
        if (
            alive
            and cwd == str(workdir.resolve())
            and b"rerank_scaling.evaluation.evaluate" in command
            and b"run" in command
        ):
            found.append(int(proc.name))
    return found


def test_killing_snakemake_leaves_no_scoring_job_running(workflow):
    """`kill -9` of Snakemake alone (not its process group) while an evaluation job scores: the job
    dies with it (it is Snakemake's own child and asked the kernel for its parent's death) instead of
    scoring on, orphaned. Last: it leaves the workflow's evaluation incomplete."""
    shutil.rmtree(workflow / RESULTS / "work" / "eval")  # nothing cached: the job scores for seconds
    log = workflow / RESULTS / "logs" / "eval" / f"{RUN}.log"
    log.unlink()
    command = snakemake_command(workflow, "tiny.yaml", "--cores", "2", "--forcerun", "evaluate_run", TARGET)
    process = subprocess.Popen(
        command,
        cwd=workflow,
        env=copy_env(workflow, own_server=True),  # the run's own server, which dies with Snakemake
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (log.exists() and "scoring in" in log.read_text()):  # started scoring 5 checkpoints
        assert process.poll() is None and time.monotonic() < deadline, "no evaluation job started"
        time.sleep(0.05)
    jobs = scoring_jobs(workflow)
    assert jobs, "precondition: the job still scores"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    time.sleep(0.5)  # the job's own scoring of 5 checkpoints takes seconds
    assert scoring_jobs(workflow) == [], f"orphaned evaluation jobs {jobs} still run"
