"""A pytest plugin for ``benchmarks/suite_time.py run``: each test phase's report as one JSON line
(test id, phase, outcome, seconds, worker, end time) appended to ``$SUITE_TIME_LOG`` as it arrives,
so a run stopped early still shows where its time went, and the workers' timelines show idle tails.

Each test's teardown line also carries ``cpu_s``: the CPU seconds its process tree spent from the
test's setup to its teardown (:func:`tree_cpu_seconds`; module fixtures count in their first test).
The sum over the tests is the work the suite does, which bounds its wall time on a given number
of cores whatever the order; the per-test wall seconds include waiting (SLURM's polling, sleeps)."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_STARTED: dict[str, float] = {}


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and of its children it reaped) from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # exited between the listing and the read
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    # fields[1] is the parent pid; utime, stime, cutime, cstime are fields 14-17 of proc(5): [11:15]
    return int(fields[1]), sum(int(ticks) for ticks in fields[11:15]) / _CLOCK_TICKS


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system) of this process, the children it reaped, and every live
    descendant with the children they reaped (the shared job server and its forked jobs, a running
    Snakemake). A descendant's time moves to its parent's reaped-children count when it exits, so
    the total grows only by work done. Not counted: processes that were re-parented away (a daemon
    that double-forked) and jobs other daemons start (SLURM's slurmd runs the SLURM test's jobs)."""
    root = os.getpid() if root is None else root
    own = sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )
    children: dict[int, list[tuple[int, float]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)) is not None:
            children.setdefault(stat[0], []).append((int(entry), stat[1]))
    total, frontier = own, [root]
    while frontier:
        for pid, seconds in children.get(frontier.pop(), []):
            total += seconds
            frontier.append(pid)
    return total


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _STARTED[item.nodeid] = tree_cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown" and item.nodeid in _STARTED:
        report.user_properties.append(("cpu_s", round(tree_cpu_seconds() - _STARTED.pop(item.nodeid), 2)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("SUITE_TIME_LOG")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):  # the controller writes what workers report
        return
    line = {
        "test": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "seconds": round(report.duration, 3),
        "worker": report.node.gateway.id if hasattr(report, "node") else "main",
        "end": round(time.time(), 1),
        **{name: value for name, value in report.user_properties if name == "cpu_s"},
    }
    with open(path, "a") as log:
        log.write(json.dumps(line) + "\n")
