"""No job process outliving its parent: ``prctl(PR_SET_PDEATHSIG)`` on Linux.

The rules' ``rerank_python_exec`` ``exec``s Python in the job's shell and passes the pid of the
shell's parent (Snakemake, or SLURM's step) in ``$RERANK_SCALING_JOB_PARENT``, so that a parent
that died while Python was still starting is seen. Called by the trainer and the scoring job
(a killed job leaves neither running) and by both sides of the job server
(:mod:`rerank_scaling.workflow.job_server`: the server follows the Snakemake that started it, a
job's client follows Snakemake, and a forked job follows the server, which sets the variable to
its own pid). Standard library only: every floor may call it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: The pid of the process that started the job's shell, which the rules' ``rerank_python_exec``
#: passes on.
PARENT_VARIABLE = "RERANK_SCALING_JOB_PARENT"


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux); False elsewhere.
    If the parent is already gone (this process re-parented: its parent is not
    ``$RERANK_SCALING_JOB_PARENT``, or changed while the request was made), send ``sig`` now."""
    if not sys.platform.startswith("linux"):
        return False
    parent = int(os.environ.get(PARENT_VARIABLE) or os.getppid())
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), sig)
    return True
