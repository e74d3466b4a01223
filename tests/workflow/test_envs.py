"""The conda env files (--sdm conda): they pin what pyproject.toml pins, survive Snakemake's copy to
.snakemake/conda/ (no path to the project in them), keep pyserini's dependencies out, resolve
offline against the project's own environment, and give each rule's stage what it imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO

ENVS = ("fitting", "retrieval", "training")
PIN = re.compile(r"\"?([A-Za-z0-9_.\-]+)==([^\s;\"]+)\"?")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_lines(env: str) -> list[str]:
    """The pip section of ``envs/<env>.yaml``."""
    spec = yaml.safe_load((REPO / "envs" / f"{env}.yaml").read_text())
    return next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)


def post_deploy_pins(env: str) -> dict[str, list[str]]:
    """``pip install`` requirements of ``envs/<env>.post-deploy.sh``: options ("" or "--no-deps")
    -> the pinned requirements installed with them."""
    script = REPO / "envs" / f"{env}.post-deploy.sh"
    installs: dict[str, list[str]] = {}
    if script.exists():
        text = script.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            if "pip install" in line:
                options = "--no-deps" if "--no-deps" in line else ""
                installs.setdefault(options, []).extend(f"{n}=={v}" for n, v in PIN.findall(line))
    return installs


def env_requirements(env: str) -> list[str]:
    return pip_lines(env) + [pin for pins in post_deploy_pins(env).values() for pin in pins]


def pinned(requirements: list[str]) -> dict[str, str]:
    return {_name(m.group(1)): m.group(2) for r in requirements if (m := PIN.fullmatch(r.strip()))}


def test_env_pins_agree_with_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    expected = pinned(project["project"]["dependencies"] + project["tool"]["rerank-scaling"]["no-deps-pins"])
    assert {path.stem for path in (REPO / "envs").glob("*.yaml")} == set(ENVS)
    for env in ENVS:
        pins = pinned(env_requirements(env))
        assert pins, env
        for name, version in pins.items():
            assert name in expected, f"{env} pins {name} but pyproject.toml does not"
            assert expected[name] == version, f"{env}: {name}=={version}, pyproject.toml has {expected[name]}"
        spec = yaml.safe_load((REPO / "envs" / f"{env}.yaml").read_text())
        assert "python=3.11" in spec["dependencies"]


def test_env_files_survive_snakemakes_copy_and_keep_pyserinis_dependencies_out():
    """Snakemake copies envs/<env>.yaml and <env>.post-deploy.sh to .snakemake/conda/<hash>.*: a
    relative path in them would point there, not to the project."""
    for env in ENVS:
        for line in pip_lines(env):
            assert not re.match(r"(-e|--editable|\.|/|~|file:)", line.strip()), f"{env}: {line!r} is a path"
            assert _name(line.split("=")[0]) != "pyserini", f"{env}: pyserini with its dependencies"
        script = REPO / "envs" / f"{env}.post-deploy.sh"
        if script.exists():
            assert ".." not in script.read_text() and "$(dirname" not in script.read_text(), env
    assert post_deploy_pins("retrieval")["--no-deps"] == ["pyserini==1.6.0"]
    # torch first (from $TORCH_INDEX when set), then what depends on it
    torch_line = next(
        line
        for line in (REPO / "envs" / "training.post-deploy.sh").read_text().splitlines()
        if "torch==" in line
    )
    assert "${TORCH_INDEX:+--index-url" in torch_line
    assert post_deploy_pins("training")[""][0].startswith("torch==")


@pytest.mark.parametrize("env", ENVS)
def test_each_env_resolves_offline_against_the_project_environment(env, tmp_path):
    """`pip install --dry-run --no-index` of an env's requirements in the project's own environment:
    every pin is what that environment has, and nothing outside it is pulled (pyserini's
    dependencies, another torch)."""
    for options, requirements in {"": pip_lines(env), **post_deploy_pins(env)}.items():
        report = tmp_path / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet"]
        command += [*options.split(), "--report", str(report), *requirements]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{env} {options}: {result.stderr[-2000:]}"
        assert json.loads(report.read_text())["install"] == [], f"{env}: would install more"


def closure(requirements: list[str]) -> set[str]:
    """The installed distributions ``requirements`` name, with their dependencies (no extras)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    found: set[str] = set()
    todo = list(requirements)
    while todo:
        requirement = Requirement(todo.pop())
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        if _name(dist.metadata["Name"]) in found:
            continue
        found.add(_name(dist.metadata["Name"]))
        for text in dist.requires or []:
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                todo.append(str(needed))
    return found


def site_view(requirements: list[str], root: Path) -> Path:
    """A site-packages directory holding only the distributions ``requirements`` pull (symlinks to
    the project environment's files): what a fresh environment built from them would import."""
    from importlib import metadata

    wanted = closure(requirements)
    view = root / "site-packages"
    view.mkdir()
    for dist in metadata.distributions():
        if _name(dist.metadata["Name"]) not in wanted:
            continue
        base = Path(dist.locate_file(""))
        for top in {Path(str(file)).parts[0] for file in dist.files or []}:
            source = base / top
            if top != ".." and source.exists() and not (view / top).exists():
                (view / top).symlink_to(source)
    return view


def stages_by_env() -> dict[str, set[str]]:
    """env -> the stage entry modules of the rules that name it (rules/*.smk)."""
    found: dict[str, set[str]] = {}
    for rule_file in (REPO / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=rule |use rule )", rule_file.read_text()):
            stage, env = (
                re.search(r'stage_code_digest\("([^"]+)"\)', block),
                re.search(r"ENVS\}/(\w+)\.yaml", block),
            )
            if stage and env:
                found.setdefault(env.group(1), set()).add(stage.group(1))
    return found


@pytest.mark.parametrize("env", ENVS)
def test_each_rules_stage_imports_with_only_its_env(env, tmp_path):
    """Each stage a rule runs in ``env`` imports from a site-packages holding only the env's
    requirements and their dependencies (and this checkout's src, as job_python runs it)."""
    stages = sorted(stages_by_env()[env])
    view = site_view(env_requirements(env), tmp_path)
    code = "import importlib, sys; [importlib.import_module('rerank_scaling.' + s) for s in sys.argv[1:]]"
    result = subprocess.run(
        [sys.executable, "-S", "-c", code, *stages],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": f"{REPO / 'src'}:{view}", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, f"{env} ({stages}): {result.stderr[-2000:]}"


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
