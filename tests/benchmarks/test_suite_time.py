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


def test_a_tests_cpu_counts_its_children_reaped_or_still_running() -> None:
    """tree_cpu_seconds grows by a child's work whether the child was reaped (its time moved to
    this process's children count) or still runs (read from /proc)."""
    import subprocess
    import sys

    from suite_time_log import tree_cpu_seconds

    spin = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
    burn = [sys.executable, "-c", spin]
    before = tree_cpu_seconds()
    subprocess.run(burn, check=True)
    reaped = tree_cpu_seconds() - before
    assert 0.9 <= reaped < 3.0
    running = subprocess.Popen([*burn[:2], burn[2] + "\ntime.sleep(30)"])
    try:
        for _ in range(100):  # until the child has burned its second and sleeps
            if tree_cpu_seconds() - before - reaped >= 0.95:
                break
            subprocess.run(["sleep", "0.1"])
        assert tree_cpu_seconds() - before - reaped >= 0.95
    finally:
        running.kill()
        running.wait()


def test_the_plugin_writes_each_tests_cpu_seconds(tmp_path: Path) -> None:
    """Under xdist, as suite_time.py runs the suite: a test that burns half a second of CPU in a
    child gets cpu_s of at least that on its teardown line, and report() tables it per module."""
    import os
    import subprocess
    import sys

    from suite_time import HERE, folder_sums, module_sums

    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "def test_burn():\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nend = time.process_time() + 0.5\\n"
        "while time.process_time() < end: pass'], check=True)\n"
        "def test_idle():\n"
        "    pass\n"
    )
    outer = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST")}
    # (run by an xdist worker, the inner pytest would take itself for one and write nothing)
    env = {**outer, "PYTHONPATH": str(HERE), "SUITE_TIME_LOG": str(tmp_path / "reports.jsonl")}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "suite_time_log", "-n", "2"]
    result = subprocess.run([*command, "test_burn.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
    tests = reports_of(tmp_path)
    assert tests["test_burn.py::test_burn"]["cpu_s"] >= 0.5
    assert tests["test_burn.py::test_idle"]["cpu_s"] < 0.5
    cpu = module_sums(tmp_path, "cpu_s")
    assert cpu["test_burn.py"] >= 0.5 and folder_sums(cpu) == {".": cpu["test_burn.py"]}
