"""benchmarks/suite_time.py reads each test's outcome from the plugin's report lines: a skip at setup
is a skip, a failure at setup or teardown an error, a failed call a failure."""

from __future__ import annotations

import json
from pathlib import Path

from suite_time import test_reports as reports_of


def test_outcomes_from_report_lines(tmp_path: Path) -> None:
    lines = [
        ("t.py::skipped", "setup", "skipped"),
        ("t.py::broken_fixture", "setup", "failed"),
        ("t.py::failed", "setup", "passed"),
        ("t.py::failed", "call", "failed"),
        ("t.py::passed", "setup", "passed"),
        ("t.py::passed", "call", "passed"),
        ("t.py::passed", "teardown", "passed"),
    ]
    (tmp_path / "reports.jsonl").write_text(
        "\n".join(
            json.dumps(
                {"test": test, "when": when, "outcome": result, "seconds": 1.0, "worker": "gw0", "end": 0}
            )
            for test, when, result in lines
        )
    )
    outcomes = {test: report["outcome"] for test, report in reports_of(tmp_path).items()}
    assert outcomes == {
        "t.py::skipped": "skipped",
        "t.py::broken_fixture": "error",
        "t.py::failed": "failed",
        "t.py::passed": "passed",
    }
    assert reports_of(tmp_path)["t.py::passed"]["seconds"] == 3.0
