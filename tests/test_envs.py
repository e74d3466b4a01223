"""The conda env files pin the same versions as pyproject.toml, and every rule names an env."""

from __future__ import annotations

import re
import tomllib

import yaml
from conftest import REPO


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", requirement.strip())
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def test_env_pins_agree_with_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    pinned = _pins(project["project"]["dependencies"] + project["tool"]["rerank-scaling"]["no-deps-pins"])
    envs = sorted((REPO / "envs").glob("*.yaml"))
    assert {e.stem for e in envs} == {"retrieval", "training", "fitting"}
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
        for name, version in _pins(pip).items():
            assert name in pinned, f"{env.name} pins {name} but pyproject.toml does not"
            assert pinned[name] == version, (
                f"{env.name}: {name}=={version}, pyproject.toml has {pinned[name]}"
            )
        assert "python=3.11" in spec["dependencies"]


def test_every_rule_names_a_conda_env_a_log_and_a_benchmark():
    for rule_file in (REPO / "rules").glob("*.smk"):
        text = rule_file.read_text()
        for block in re.split(r"\n(?=rule )", text):
            if not block.startswith("rule "):
                continue
            name = block.split(":")[0]
            assert "conda:" in block, f"{rule_file.name}: {name} has no conda env"
            assert "log:" in block, f"{rule_file.name}: {name} has no log"
            assert "benchmark:" in block, f"{rule_file.name}: {name} has no benchmark"
