"""Kill the `train` job of the real workflow at every point of a checkpoint and re-run the same command.

The trainer is stopped through its fault-injection hook (``RERANK_SCALING_FAULT``, which SIGKILLs or
SIGTERMs the real trainer at a named point of its real code path) or by killing Snakemake and the
job together. Snakemake then removes the failed job's outputs, as it does after any failure; the
re-run must end with the checkpoint steps and the bit-identical tensors of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake_command, workflow_env

from rerank_scaling.training.model_saves import checkpoint_tensors

pytestmark = pytest.mark.slow

RUN = "L1__pointwise__full__s13"
CHECKPOINTS = 3


def resume_config() -> dict:
    """tests/configs/tiny.yaml cut to one run of 6 steps with 3 checkpoints."""
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["run_name"] = "resume"
    config["models"] = config["models"][:1]
    config["training"].update(
        objectives=["pointwise"], attention=["full"], max_steps=6, checkpoints=CHECKPOINTS
    )
    config["fitting"]["metrics"] = ["nDCG@10"]
    return config


def snakemake(workdir: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    """The run on ``workdir`` up to ``train``, its trainer stopped by ``fault`` if given. Its jobs fork
    from the test process's job server (:func:`conftest.shared_job_server`): a trainer stopped by
    its own fault hook dies the same way under it as under a server of the run's own, which would
    cost each run the server's start (importing torch, transformers and sentence-transformers:
    ~10 s on an AMD EPYC Zen 1). Only the run killed together with its job
    (:func:`test_killing_snakemake_and_the_job_together_then_rerun_incomplete`) starts its own, as a
    user's run does, since there the server's process group is what dies with Snakemake."""
    env = workflow_env()
    env.pop("RERANK_SCALING_FAULT", None)
    if fault:
        env["RERANK_SCALING_FAULT"] = fault
    command = snakemake_command(workdir, "resume.yaml", "--cores", "1", "--until", "train", *args)
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env)


def train_log(workdir: Path) -> str:
    return (workdir / "results" / "resume" / "logs" / "train" / f"{RUN}.log").read_text()


def checkpoints(workdir: Path) -> dict[int, dict]:
    """Checkpoint index -> its step and every tensor of its weights: the encoder's (both shards) and
    the mean head's (``2_Dense/<tensor>``)."""
    root = workdir / "results" / "resume" / "checkpoints" / RUN
    found = {}
    for sidecar in sorted(root.glob("ckpt-*/checkpoint.json")):
        step = json.loads(sidecar.read_text())["step"]
        tensors = checkpoint_tensors(sidecar.parent)
        assert any(name.startswith("2_Dense/") for name in tensors), sorted(tensors)  # the mean head
        found[int(sidecar.parent.name[5:])] = {"step": step, "tensors": tensors}
    return found


def assert_same_checkpoints(got: dict[int, dict], expected: dict[int, dict]) -> None:
    assert sorted(got) == sorted(expected) == list(range(1, CHECKPOINTS + 1))
    for index, reference in expected.items():
        assert got[index]["step"] == reference["step"], index
        tensors = got[index]["tensors"]
        assert tensors.keys() == reference["tensors"].keys()
        for name, tensor in reference["tensors"].items():
            assert tensors[name].dtype == tensor.dtype and tensors[name].equal(tensor), (index, name)


@pytest.fixture(scope="module")
def prepared(module_dir) -> Path:
    """A workflow copy that has built its data, BM25 runs and training examples (not trained)."""
    workdir = copy_workflow(module_dir / "resume")
    (workdir / "resume.yaml").write_text(yaml.safe_dump(resume_config()))
    command = snakemake_command(workdir, "resume.yaml", "--cores", "1", "--until", "training_examples")
    result = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=workflow_env())
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return workdir


def copy_of(prepared: Path, target: Path) -> Path:
    shutil.copytree(prepared, target, symlinks=True)
    return target


@pytest.fixture(scope="module")
def uninterrupted(prepared, module_dir) -> dict[int, dict]:
    workdir = copy_of(prepared, module_dir / "uninterrupted" / "w")
    result = snakemake(workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    found = checkpoints(workdir)
    assert [found[k]["step"] for k in sorted(found)] == [2, 4, 6]
    return found


def test_kills_at_every_point_of_a_checkpoint_then_a_rerun_matches_the_uninterrupted_run(
    prepared, uninterrupted, tmp_path
):
    workdir = copy_of(prepared, tmp_path / "w")
    # between checkpoints; inside an export; state written, not marked complete; exported, state
    # not complete; state complete, not published
    for fault in ("published:1", "export:2", "state:2", "exported:3", "completed:3"):
        result = snakemake(workdir, fault=fault)
        assert result.returncode != 0, f"{fault}: the job was not killed"
        assert f"fault injection: kill at {fault.replace(':', ' ')}" in train_log(workdir), fault
        sidecars = list((workdir / "results" / "resume" / "checkpoints" / RUN).glob("ckpt-*/checkpoint.json"))
        assert not sidecars, f"{fault}: Snakemake should have removed the failed job's outputs"
    result = snakemake(workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    log = train_log(workdir)
    assert "resuming from" in log and "re-published checkpoints [1, 2, 3]" in log, log[-3000:]
    assert_same_checkpoints(checkpoints(workdir), uninterrupted)


def test_sigterm_saves_the_state_and_the_rerun_resumes_from_that_step(prepared, uninterrupted, tmp_path):
    workdir = copy_of(prepared, tmp_path / "w")
    result = snakemake(workdir, fault="step:3:term")  # SIGTERM after step 3, between checkpoints 1 and 2
    assert result.returncode != 0
    assert "stopped by SIGTERM at step 3 of 6" in train_log(workdir)
    result = snakemake(workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert re.search(r"resuming from \S+checkpoint-3 \(step 3\)", train_log(workdir))
    assert_same_checkpoints(checkpoints(workdir), uninterrupted)


def test_killing_snakemake_and_the_job_together_then_rerun_incomplete(prepared, uninterrupted, tmp_path):
    workdir = copy_of(prepared, tmp_path / "w")
    env = {**workflow_env(own_server=True), "RERANK_SCALING_FAULT": "published:2:hold"}
    command = snakemake_command(workdir, "resume.yaml", "--cores", "1", "--until", "train")
    process = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    log = workdir / "results" / "resume" / "logs" / "train" / f"{RUN}.log"
    deadline = time.monotonic() + 300
    held = None
    while held is None:
        assert process.poll() is None and time.monotonic() < deadline, "the trainer never reached its hold"
        held = re.search(r"hold at published 2 \(pid (\d+)\)", log.read_text() if log.exists() else "")
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)  # Snakemake
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(held.group(1)), signal.SIGKILL)  # and its job, if it runs in another group
    process.wait()
    assert snakemake(workdir, "--unlock").returncode == 0
    result = snakemake(workdir, "--rerun-incomplete")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "re-published checkpoints [1, 2]" in train_log(workdir)
    assert_same_checkpoints(checkpoints(workdir), uninterrupted)


def test_a_rerun_with_other_settings_starts_afresh_instead_of_resuming(prepared, uninterrupted, tmp_path):
    workdir = copy_of(prepared, tmp_path / "w")
    assert snakemake(workdir, fault="published:2").returncode != 0
    config = yaml.safe_load((workdir / "resume.yaml").read_text())
    config["training"]["lr"] = 3.0e-4
    (workdir / "resume.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    log = train_log(workdir)
    assert (
        "holds state of other settings, data or code: starting afresh" in log and "resuming from" not in log
    )
    got = checkpoints(workdir)
    assert [got[k]["step"] for k in sorted(got)] == [2, 4, 6]
    reference = uninterrupted[1]["tensors"]
    assert any(not got[1]["tensors"][name].equal(tensor) for name, tensor in reference.items())
