"""The config means what it says, checked where a user meets it: `snakemake -n`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake_command, workflow_env


@pytest.fixture(scope="module")
def workflow(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("workflow")
    copy_workflow(workdir)
    return workdir


def dry_run(workdir: Path, overlay: str) -> subprocess.CompletedProcess:
    (workdir / "overlay.yaml").write_text(overlay)
    command = snakemake_command(workdir, "overlay.yaml", "-n", "--quiet")
    env = {**workflow_env(), "PYTHONPATH": str(workdir / "src")}
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env)


def test_a_key_given_twice_stops_the_dry_run_naming_the_key_and_both_lines(workflow):
    result = dry_run(workflow, "fitting:\n  bootstrap: 20\n  seed: 1\n  bootstrap: 30\n")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"{workflow / 'overlay.yaml'}:4: key 'bootstrap' is given twice (first on line 2)" in output, (
        output
    )


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ("training: {checkpoints: 3.0}", "'training.checkpoints': 3.0 is not an integer; write 3"),
        ("evaluation: {rerank_depth: 10.0}", "'evaluation.rerank_depth': 10.0 is not an integer; write 10"),
        ("run_name: ..", "'run_name': '..' is not a directory name of its own"),
    ],
)
def test_values_the_schema_used_to_pass_stop_the_dry_run_naming_the_field(workflow, overlay, message):
    result = dry_run(workflow, overlay + "\n")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and message in output, output[-2000:]
