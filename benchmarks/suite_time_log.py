"""A pytest plugin for ``benchmarks/suite_time.py run``: each test phase's report as one JSON line
(test id, phase, outcome, seconds, worker, end time) appended to ``$SUITE_TIME_LOG`` as it arrives,
so a run stopped early still shows where its time went, and the workers' timelines show idle tails."""

from __future__ import annotations

import json
import os
import time

import pytest


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
    }
    with open(path, "a") as log:
        log.write(json.dumps(line) + "\n")
