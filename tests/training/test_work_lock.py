"""One trainer per work directory; a trainer dies with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LADDER, TINY_TRAINING, train_command

from rerank_scaling.parent_process import PARENT_VARIABLE
from rerank_scaling.training.work_lock import WorkDirBusy, work_lock

RUN = "L1__pointwise__full__s13"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) counts as dead
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def test_a_second_trainer_on_a_live_lock_says_so_and_changes_nothing(tmp_path):
    examples = {name: tmp_path / f"{name}.missing" for name in ("pointwise", "groups", "corpus")}
    command = train_command(RUN, LADDER, TINY_TRAINING, examples, tmp_path)
    with work_lock(tmp_path / "work"):
        result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode != 0
    assert f"{tmp_path / 'work'}: in use by another trainer (pid {os.getpid()} on " in result.stderr, (
        result.stderr
    )
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == [".lock"]
    with work_lock(tmp_path / "work"):  # released with its holder
        with pytest.raises(WorkDirBusy):
            with work_lock(tmp_path / "work"):
                pass


@pytest.mark.slow
def test_killing_the_wrapper_stops_the_trainer_and_frees_the_work_directory(examples, tmp_path):
    """A shell wrapper that does not exec (the old rule) is SIGKILLed while its trainer trains: the
    trainer gets SIGTERM from the kernel (PR_SET_PDEATHSIG), saves its state and exits; the retry may
    start. (Before, it went on training, re-parented to init.)"""
    log = tmp_path / "train.log"
    command = " ".join(f"'{part}'" for part in train_command(RUN, LADDER, TINY_TRAINING, examples, tmp_path))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    wrapper = subprocess.Popen(["bash", "-c", f"{command} > {log} 2>&1; echo wrapper done"], env=env)
    deadline = time.monotonic() + 300
    marker = "SIGTERM from now on saves"  # training has begun, its SIGTERM handler installed
    while marker not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline and wrapper.poll() is None, log.read_text()[-3000:]
        time.sleep(0.5)
    holder = (tmp_path / "work" / ".lock").read_text().split()
    trainer = int(holder[1])
    assert trainer != wrapper.pid and alive(trainer)
    wrapper.send_signal(signal.SIGKILL)
    wrapper.wait()
    deadline = time.monotonic() + 60
    while alive(trainer):
        assert time.monotonic() < deadline, "the trainer outlived its wrapper"
        time.sleep(0.2)
    assert "SIGTERM: saving the trainer state" in log.read_text()
    with work_lock(tmp_path / "work"):
        pass


def test_a_trainer_on_another_node_is_seen_through_its_slurm_job(tmp_path, monkeypatch):
    """Where flock is node-local (Lustre's localflock), the lock file's record decides: another
    host's SLURM job that squeue still lists holds the directory; one it no longer lists, or this
    job's own id (a requeue), does not. squeue is a stand-in that knows one running job, 4242, and
    answers SLURM's own error for any other id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(
        '#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\n'
        'case "$*" in *"-j 4242 "*) echo RUNNING ;; '
        '*) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1 ;; esac\n'
    )
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    lock = work / ".lock"
    lock.write_text("pid 77 on node-b17 slurm job 4242\n")
    with pytest.raises(WorkDirBusy, match=r"another node \(pid 77 on node-b17 slurm job 4242\)"):
        with work_lock(work):
            pass
    assert lock.read_text() == "pid 77 on node-b17 slurm job 4242\n"  # untouched
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # the same job, requeued: its own record
    with work_lock(work):
        assert lock.read_text().split()[-3:] == ["slurm", "job", "4242"]
    assert lock.read_text() == ""  # a clean exit leaves no record
    monkeypatch.setenv("SLURM_JOB_ID", "5000")
    lock.write_text("pid 77 on node-b17 slurm job 999\n")  # a finished job: stale
    with work_lock(work):
        assert lock.read_text() == f"pid {os.getpid()} on {os.uname().nodename} slurm job 5000\n"
    assert (bin_dir / "calls").read_text().split("\n")[:2] == ["-h -j 4242 -o %T", "-h -j 999 -o %T"]


def test_a_job_whose_parent_died_while_it_started_stops_at_once():
    """``$RERANK_SCALING_JOB_PARENT`` (what the rules' ``rerank_python_exec`` passes) names a pid that
    is no longer the job's parent (Snakemake died while Python still imported): SIGTERM at once. Its
    real parent: the job runs on."""
    code = "from rerank_scaling.parent_process import die_with_parent; die_with_parent(); print('ran on')"
    for parent, ran_on in ((os.getpid() + 1, False), (os.getpid(), True)):
        env = {**os.environ, PARENT_VARIABLE: str(parent)}
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert result.returncode == (0 if ran_on else -signal.SIGTERM), result.stderr[-2000:]
        assert ("ran on" in result.stdout) is ran_on
