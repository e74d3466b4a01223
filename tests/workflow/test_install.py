"""The README's cluster install step, run verbatim by bash on a copy of scripts/install.sh whose
`.venv/bin/python` records what it is asked to run: the torch build comes from $TORCH_INDEX and
is installed before anything that depends on it, the extras asked for are installed, and the
windowed-attention extension is built only if a config asks for it."""

from __future__ import annotations

import os
import shutil
import subprocess

from conftest import REPO, readme_block

# Stands for the venv's python: logs its arguments; `-c` (install.sh's pyserini check) says "absent".
RECORDER = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls.log"
case "$1" in -c) exit 1 ;; esac
exit 0
"""


def run_install(tmp_path, script: str) -> list[str]:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    for name in ("config.yaml", "config.paper.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(RECORDER)
    python.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in ("TORCH_INDEX", "EXTRAS")}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return (tmp_path / ".venv" / "calls.log").read_text().splitlines()


def test_the_readme_install_step_takes_torch_from_torch_index_first(tmp_path):
    calls = run_install(tmp_path, readme_block("**1. Install, on the login node**", {}))
    pip = [call for call in calls if call.startswith("-m pip install")]
    torch_index = "https://download.pytorch.org/whl/cu126"
    assert pip[1] == f"-m pip install -q torch==2.13.0 --index-url {torch_index}", pip
    assert pip[2] == "-m pip install -q -e .[test,slurm]", pip
    assert "-m pip install -q --no-deps pyserini==1.6.0" in pip
    # config.yaml and config.paper.yaml train full attention: the build step looks and builds nothing
    (build,) = [call for call in calls if "extension_build" in call]
    assert build == "-m rerank_scaling.compute.extension_build --if-configured config.yaml config.paper.yaml"


def test_without_torch_index_torch_comes_from_pypi(tmp_path):
    calls = run_install(tmp_path, "BUILD_EXTENSION=0 scripts/install.sh\n")
    assert "-m pip install -q torch==2.13.0" in calls and "-m pip install -q -e .[test]" in calls, calls
    assert not [call for call in calls if "extension_build" in call]
