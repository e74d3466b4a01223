"""scripts/check_free_space.py, and ./test.sh stopping on it before it installs anything."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "scripts" / "check_free_space.py"
spec = importlib.util.spec_from_file_location("check_free_space", SCRIPT)
check_free_space = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_free_space)


def free_gb(path: Path) -> float:
    return shutil.disk_usage(path).free / check_free_space.GB


def test_a_disk_with_room_passes_and_one_without_says_what_it_has_and_needs(tmp_path):
    assert check_free_space.shortfall(tmp_path, 0.001) is None
    need = free_gb(tmp_path) + 10_000
    problem = check_free_space.shortfall(tmp_path, need)
    assert problem is not None and str(tmp_path) in problem and f"{need:g} GB needed" in problem
    # a folder still to be made is judged by the disk it will be made on
    assert check_free_space.shortfall(tmp_path / "not" / "yet", 0.001) is None
    assert check_free_space.shortfall(tmp_path / "not" / "yet", need) is not None


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_command_exits_1_with_one_line_naming_the_job_and_the_fix(tmp_path):
    args = ["--path", str(tmp_path), "--for", "the job", "--fix", "Free some space."]
    ok = check(*args, "--need-gb", "0.001")
    assert ok.returncode == 0 and ok.stderr == ""
    need = f"{free_gb(tmp_path) + 10_000:.0f}"
    short = check(*args, "--need-gb", need)
    assert short.returncode == 1
    assert short.stderr.startswith("the job: ") and short.stderr.rstrip().endswith("Free some space.")
    assert len(short.stderr.splitlines()) == 1


def test_test_sh_stops_on_a_full_disk_before_installing(tmp_path):
    """./test.sh, verbatim, on a temporary folder whose disk cannot hold what it is told the suite
    needs: one line, exit 1, within seconds (nothing installed, no test run)."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "TEST_DISK_GB": f"{free_gb(tmp_path) + 10_000:.0f}"}
    result = subprocess.run(["./test.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == "" and "test suite" in result.stderr and str(tmp_path) in result.stderr
    assert "TMPDIR" in result.stderr  # the fix: another disk, or free space
