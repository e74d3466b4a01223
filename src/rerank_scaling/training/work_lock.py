"""One trainer per work directory, and no trainer outliving the job that started it.

A ``train`` job resumes from its work directory (``results/<run>/work/train/<run>``). Two trainers
there would interleave their resume states and checkpoints. Killing a job's shell wrapper used to
leave the Python trainer running, and the retry then started a second one. So:

* :func:`work_lock` holds an exclusive ``flock`` on ``<work>/.lock`` for the whole run; a second
  trainer fails at once, naming the live holder's pid and host. The kernel drops the lock when its
  holder dies however it dies, so a crashed trainer never leaves a stale lock.
* Across nodes ``flock`` may be node-local (Lustre mounted with ``localflock``, some NFS setups):
  a trainer on another node gets the lock too. So the lock file also records its holder's host and
  SLURM job id (``SLURM_JOB_ID``), and is emptied on a clean exit; a trainer that finds the record
  of another host's job that SLURM still lists (``squeue -j``: pending, running, completing) fails
  like a local second trainer. A record of its own job id (a requeue) or of a job SLURM no longer
  lists is stale and overwritten; without SLURM (no job id, or no ``squeue``) only ``flock`` guards.
* :func:`rerank_scaling.parent_process.die_with_parent` asks Linux to send the trainer SIGTERM
  when its parent process dies (``prctl(PR_SET_PDEATHSIG)``), and the rule's shell ``exec``s the
  trainer, so that the job's own process is the trainer and no wrapper stands between it and
  Snakemake or SLURM.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path


class WorkDirBusy(RuntimeError):
    """Another live trainer holds the work directory's lock."""


def holder_record() -> str:
    """What the lock file says of its holder: pid, host and, under SLURM, the job id."""
    job = os.environ.get("SLURM_JOB_ID")
    return f"pid {os.getpid()} on {socket.gethostname()}" + (f" slurm job {job}" if job else "")


def slurm_job_alive(job: str) -> bool | None:
    """Whether SLURM still lists job ``job`` (``squeue -h -j``: pending, running, completing);
    None when it cannot be asked (no ``squeue``, or it failed other than on an unknown job id)."""
    if shutil.which("squeue") is None:
        return None
    try:
        done = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return False if "invalid job id" in done.stderr.lower() else None
    return bool(done.stdout.strip())


def live_holder_elsewhere(record: str) -> str | None:
    """``record`` (a :func:`holder_record` found in the lock file) when it names another host's
    SLURM job that is still alive, else None (module docstring)."""
    words = record.split()
    if "on" not in words or "job" not in words:
        return None
    host, job = words[words.index("on") + 1], words[words.index("job") + 1]
    if host == socket.gethostname() or job == os.environ.get("SLURM_JOB_ID"):
        return None  # this host: flock decided; this job: a requeue of it
    return record if slurm_job_alive(job) else None


@contextlib.contextmanager
def work_lock(work: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold an exclusive lock on the work directory ``work`` (created if missing) while the block
    runs; :class:`WorkDirBusy` names the holder when another live process has it."""
    path = Path(work) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "an unknown process"
            raise WorkDirBusy(
                f"{work}: in use by another trainer ({holder}), still alive: two trainers in one work "
                "directory would overwrite each other's resume state. Wait for it to finish or stop it "
                "(kill <pid>), then retry; this retry changed nothing"
            ) from None
        previous = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if holder := live_holder_elsewhere(previous):
            raise WorkDirBusy(
                f"{work}: in use by a trainer on another node ({holder}), whose SLURM job is still "
                "alive: this file system's lock is node-local, so the record decides. Wait for that job "
                "or cancel it (scancel <job>), then retry; this retry changed nothing"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{holder_record()}\n".encode(), 0)
        yield path
        os.ftruncate(fd, 0)  # a clean exit leaves no record for another node to ask about
    finally:
        os.close(fd)  # releases the lock
