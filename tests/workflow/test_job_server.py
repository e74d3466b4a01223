"""The job server (rerank_scaling.workflow.job_server): a job run through it sees its own stdin,
stdout, directory, environment and checkout's code, exits with its own status, gets the SIGTERM its
side receives, and without a server (or inside a SLURM job) starts as a plain interpreter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rerank_scaling.workflow import job_server

REPO = Path(__file__).resolve().parents[2]
JOB = """
import os, signal, sys, time
import rerank_scaling
def stop(sig, frame):
    print("terminated", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
seen = (os.getcwd(), os.environ.get("JOB_NOTE"), sys.stdin.read().strip())
seen += (rerank_scaling.__file__, os.getppid())
print(*seen, flush=True)
if sys.argv[1:] == ["wait"]:
    time.sleep(60)
sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1] != "wait" else 0)
"""


# What a job's huggingface_hub read when imported (in the server, for a forked job), and its parent.
HUB_JOB = """
import os
import huggingface_hub.constants
print(huggingface_hub.constants.HF_HUB_OFFLINE, os.getppid())
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A running server; the job modules ``probe`` and ``hub_probe`` in a folder of their own."""
    folder = tmp_path_factory.mktemp("jobs")
    (folder / "probe.py").write_text(JOB)
    (folder / "hub_probe.py").write_text(HUB_JOB)
    with pytest.MonkeyPatch.context() as patch:
        # as in a fresh Snakemake process; importing sentence_transformers sets it (in the server too)
        patch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        started = job_server.start(folder / "server.log")
        assert started is not None, (folder / "server.log").read_text()
        yield started, folder, os.environ[job_server.SERVER_VARIABLE]
    job_server.stop(started)
    assert started.poll() is not None and job_server.SERVER_VARIABLE not in os.environ


def client(
    folder: Path, *args: str, env: dict | None = None, module: str = "probe", **kwargs
) -> subprocess.Popen:
    command = [sys.executable, "-m", "rerank_scaling.workflow.job_server", "run", "-m", module, *args]
    environment = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{REPO / 'src'}", "JOB_NOTE": "mine"}
    return subprocess.Popen(
        command, cwd=folder, env={**environment, **(env or {})}, text=True, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs,
    )  # fmt: skip


def test_a_job_gets_its_own_stdio_directory_environment_code_and_status(server):
    started, folder, _ = server
    job = client(folder, "3")
    out, err = job.communicate("hello", timeout=60)
    assert job.returncode == 3, err
    cwd, note, stdin, package, parent = out.split()
    assert (cwd, note, stdin) == (str(folder), "mine", "hello")
    assert package == str(REPO / "src" / "rerank_scaling" / "__init__.py")
    assert int(parent) == started.pid  # forked by the server


def test_sigterm_reaches_the_job_and_its_exit_status_comes_back(server):
    _, folder, _ = server
    job = client(folder, "wait")
    job.stdin.close()
    time.sleep(2)
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=30)
    assert job.returncode == 7 and job.stdout.read().splitlines()[-1] == "terminated"


NO_SERVER = (
    {job_server.SERVER_VARIABLE: ""},
    {job_server.SERVER_VARIABLE: job_server.OFF},
    {"SLURM_JOB_ID": "1"},
)


@pytest.mark.parametrize("env", NO_SERVER)
def test_without_a_server_or_under_slurm_the_job_is_a_plain_process(server, env):
    started, folder, _ = server
    job = client(folder, "0", env=env)
    out, err = job.communicate("x", timeout=120)
    assert job.returncode == 0, err
    assert int(out.split()[-1]) != started.pid  # exec'd in place: its parent is this test


def test_a_job_whose_hub_offline_setting_differs_from_the_servers_starts_plain_and_reads_its_own(server):
    """huggingface_hub reads HF_HUB_OFFLINE once, when imported: a job forked from a server imported
    online ran online although its shell set HF_HUB_OFFLINE=1 (the compute rules do). Such a job
    now starts as a plain process and reads its own value; one with the server's value is forked."""
    started, folder, _ = server
    servers = os.environ.get("HF_HUB_OFFLINE")  # the fixture's server has this process's environment
    other = "0" if servers == "1" else "1"
    for value, forked in ((servers, True), (other, False)):
        env = {"HF_HUB_OFFLINE": value} if value is not None else {}  # None: absent in both
        job = client(folder, env=env, module="hub_probe")
        out, err = job.communicate("", timeout=120)
        assert job.returncode == 0, err
        offline, parent = out.split()
        assert offline == str(value == "1"), (value, out)
        assert (int(parent) == started.pid) is forked, (value, out)
