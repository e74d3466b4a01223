"""The package's shape: a floor plan (:data:`FLOORS`, bottom first: no import runs upward, function-level
imports included, and no import cycle), a ground floor of at most :data:`MAX_GROUND_MODULES`
modules, a workflow layer that loads no stage's implementation, rooms that stay small (no module
over 400 lines, but the ones named here with the reason) and config defaults with one home (no
``.get("<config key>", <default>)`` outside the config and settings modules, but the ones named
here with the reason)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rerank_scaling"
#: A smell detector, not a rule to satisfy by cutting: a module over it is read for a second
#: concept to split out; one that holds a single concept stays whole, named in OVERSIZED with why.
MAX_LINES = 400
#: The floors, bottom first: a module imports only its own floor's modules and those of the floors
#: below. ``rerank_scaling`` is the ground floor (the modules at the package root: settings and
#: the schema's defaults, the run grid, table columns, steps, devices, figures' helpers, atomic
#: writes, code digests); ``workflow`` the top (what the Snakefile reads). Each subpackage is a
#: floor of its own: the registries (objectives, metrics, size axes: read by every stage),
#: the hub's caches, the model families, the data, the law fitting, the cost and
#: memory planning (the trainer asks it for micro-batches), the training, the evaluation, the
#: report, the forecasts (the fit stage and the user's tables, which use the report's words).
FLOORS = (
    "rerank_scaling",
    "compute",
    "registries",
    "hub",
    "families",
    "data",
    "laws",
    "planning",
    "training",
    "evaluation",
    "report",
    "forecast",
    "workflow",
)
MAX_GROUND_MODULES = 10
#: The stage modules the workflow layer imports, each with why it is light enough for every
#: parse of the Snakefile (none loads torch: :func:`test_the_workflow_layer_loads_no_stage_implementation`).
WORKFLOW_READS: dict[str, str] = {
    "data.annotation_files": "the generated-query sources the rules name, and their config check",
    "data.bm25": "BM25's settings (the job resources size its index and search jobs)",
    "data.collection": "the local collection's layout (the data checks)",
    "data.source_digests": "the digest files of a local collection's files, the rules' inputs",
    "data.subsets": "the data fractions' query counts (the step checks)",
    "data.training_examples": "the examples' settings (their memory model)",
    "evaluation.eval_settings": "the evaluation's specification: settings, job keys",
    "evaluation.metric_settings": "the metrics a config's evaluation names (fitting checks, merge memory)",
    "families.paths": "a model's path rules (the model checks)",
    "families.registry": "the family of a models[] entry (checks, memory, job resources)",
    "hub.cache": "whether a model is a hub id (the model checks)",
    "hub.pins": "the pinned revisions the config's models load",
    "laws.fit_settings": "the fit stage's specification: settings, the tables it writes",
    "planning.encoder_flops": "a model's shape, which sizes its jobs",
    "planning.gpu_fit": "the planned GPU every job inherits",
    "planning.memory": "the memory preflight of every (model, objective)",
    "registries.measures": "the metrics and their config keys (the fitting checks' message)",
    "registries.objectives": "each objective's batch, rows and steps (the step, memory and time checks)",
    "report.figure_names": "the report stage's specification: the figures it writes",
    "training.attention_support": "which families support windowed attention (the attention check)",
    "training.checkpoint_store": "the published checkpoints' parse-time size check",
    "training.train_settings": "the training stage's specification: settings, grid keys",
}
#: What a stage's implementation loads and no parse of the Snakefile may (pandas and ir_measures:
#: 0.75 s of a fresh folder's dry run on an AMD EPYC Zen 1).
HEAVY = ("torch", "transformers", "sentence_transformers", "matplotlib", "scipy", "pandas", "ir_measures")
#: Modules still over MAX_LINES, each with why; a new one over the limit fails the test.
OVERSIZED: dict[str, str] = {
    "workflow/job_resources.py": "one concept, one owner: what every rule asks the cluster for "
    "(placement, GPUs, time and memory of the model, BM25 and data-sized CPU jobs), each documented "
    "in its 47-line module docstring; the measured models themselves live in cpu_memory.py",
}

#: ``.get("<key>", <default>)`` calls whose key is also a config key but which read no config
#: section, each with why. A new one fails the test: read the filled config (``config[...]``), or a
#: settings object (``settings_from_dict``, ``settings.with_defaults``, ``settings.model_spec``),
#: whose defaults are the schema's; a config file as written: ``settings.written_section``.
KNOWN_GETS = {
    ("src/rerank_scaling/laws/allocation.py", "planning"): "a fits-table column, not the section",
    ("src/rerank_scaling/hub/pins.py", "models"): "the pin lock file's map, not the config's models",
}
#: ``.get("<key>", <default>)``, and ``.get("<key>") or <default>``, the same default in other words.
GET_WITH_DEFAULT = re.compile(r'\.get\(\s*["\']([A-Za-z_][A-Za-z0-9_]*)["\']\s*(?:,|\)\s*or\b)')


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = ("rerank_scaling", *path.relative_to(package).with_suffix("").parts)
    return ".".join(parts).removesuffix(".__init__")


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body (function level included)."""
    modules = {module_name(path, package): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rerank_scaling"):
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    found.add(target if target in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("rerank_scaling"))
        graph[name] = {target for target in found if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def floor_of(module: str) -> int:
    """The floor of a package module (:data:`FLOORS`): its subpackage's, or the ground floor's."""
    parts = module.split(".")
    package = parts[1] if len(parts) > 2 else "rerank_scaling"
    if package not in FLOORS:
        raise AssertionError(f"{module}: package {package!r} has no floor in FLOORS; add it where it belongs")
    return FLOORS.index(package)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every (importer, imported) pair of ``graph`` whose imported module sits on a higher floor."""
    return sorted(
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if floor_of(target) > floor_of(module)
    )


def plant(tmp_path: Path, module: str, text: str) -> Path:
    """A copy of the package with ``text`` appended to ``module`` (dotted, in the package)."""
    copy = tmp_path / "rerank_scaling"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy.joinpath(*module.split(".")[1:]).with_suffix(".py")
    path.write_text(path.read_text() + text)
    return copy


def check_floors(package: Path = PACKAGE) -> None:
    """The floors test's check: no import of ``package`` runs up a floor (:data:`FLOORS`)."""
    graph = import_graph(package)
    assert "rerank_scaling.forecast.fit_stage" in graph and graph["rerank_scaling.forecast.fit_stage"]
    assert upward_imports(graph) == []


def test_no_import_runs_up_a_floor():
    check_floors()


def test_the_floors_check_fails_on_an_upward_import_planted_in_a_copy_of_the_package(tmp_path):
    """The real check on a copy of the real package with one planted import: at function level
    (where a lazy import would hide it from a module-level reading) from the data floor into
    training; at module level from the ground floor into the workflow layer."""
    planted = "\n\ndef planted():\n    from rerank_scaling.training.train_settings import TrainSettings\n"
    copy = plant(tmp_path, "rerank_scaling.data.subsets", planted)
    assert upward_imports(import_graph(copy)) == [
        ("rerank_scaling.data.subsets", "rerank_scaling.training.train_settings")
    ]
    with pytest.raises(AssertionError, match="data.subsets"):
        check_floors(copy)
    ground = plant(tmp_path / "ground", "rerank_scaling.grid", "from rerank_scaling.workflow import load\n")
    with pytest.raises(AssertionError, match="rerank_scaling.grid"):
        check_floors(ground)
    check_floors(
        plant(tmp_path / "down", "rerank_scaling.workflow.load", "from rerank_scaling import grid\n")
    )


def test_the_ground_floor_holds_few_modules():
    ground = sorted(path.stem for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(ground) <= MAX_GROUND_MODULES, ground


def rule_file_imports(text: str) -> set[str]:
    """The package modules a Snakefile or rule file imports (``from rerank_scaling.x import ...``,
    ``import rerank_scaling.x``), read line by line (a rule file is not plain Python)."""
    found = set(re.findall(r"^\s*from (rerank_scaling(?:\.\w+)*) import", text, re.MULTILINE))
    return found | set(re.findall(r"^\s*import (rerank_scaling(?:\.\w+)*)", text, re.MULTILINE))


def test_the_rule_files_import_only_the_workflow_layer():
    files = [ROOT / "Snakefile", *sorted(ROOT.glob("rules/*.smk"))]
    imported = {(path.name, module) for path in files for module in rule_file_imports(path.read_text())}
    assert ("common.smk", "rerank_scaling.workflow.stages") in imported
    outside = {
        (name, module) for name, module in imported if not module.startswith("rerank_scaling.workflow")
    }
    assert outside == set()
    assert rule_file_imports(
        "from rerank_scaling.grid import Grid\n    import rerank_scaling.data.bm25\n"
    ) == {
        "rerank_scaling.grid",
        "rerank_scaling.data.bm25",
    }


def test_the_workflow_layer_reads_only_the_named_stage_modules():
    graph = import_graph()
    read = {
        target.removeprefix("rerank_scaling.")
        for module, targets in graph.items()
        if module.startswith("rerank_scaling.workflow.")
        for target in targets
        if 0 < floor_of(target) < FLOORS.index("workflow")
    }
    assert read == set(WORKFLOW_READS), sorted(read ^ set(WORKFLOW_READS))


def test_the_workflow_layer_loads_no_stage_implementation():
    """Importing every module of the layer (what a parse of the Snakefile does) loads none of
    :data:`HEAVY`; its function-level imports too (the config checks, the job resources)."""
    layer = [module for module in import_graph() if module.startswith("rerank_scaling.workflow")]
    modules = sorted([*layer, *(f"rerank_scaling.{module}" for module in WORKFLOW_READS)])
    script = f"import importlib, sys\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
    script += f"print(sorted(set({HEAVY!r}) & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_cycles_are_found_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    assert "rerank_scaling.laws.runner" in graph and graph["rerank_scaling.laws.runner"]
    assert cycles(graph) == []


def test_no_module_over_the_line_limit_but_the_named_ones():
    over = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
        if len(path.read_text().splitlines()) > MAX_LINES
    }
    assert set(over) == set(OVERSIZED), over


def config_keys() -> set[str]:
    """Every property name anywhere in the config schema."""
    keys: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            keys.update(node.get("properties", {}))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((PACKAGE / "schemas" / "config.schema.yaml").read_text()))
    return keys


def gets_with_default(text: str, keys: set[str]) -> set[str]:
    """The config keys ``text`` reads with ``.get("<key>", <default>)``."""
    return {match.group(1) for match in GET_WITH_DEFAULT.finditer(text) if match.group(1) in keys}


def is_config_module(path: Path) -> bool:
    """The modules that own defaults: settings.py (the schema's) and the workflow layer's config
    loading and checks."""
    config_layer = path.parent == PACKAGE / "workflow" and (path.stem == "load" or "checks" in path.stem)
    return path == PACKAGE / "settings.py" or config_layer


def test_a_get_with_a_default_on_a_config_key_is_found():
    keys = config_keys()
    assert {"lr", "rerank_depth", "threads", "head"} <= keys
    text = 'batch = training.get("pointwise_batch_size", 16)\nx = row.get("label", 0)\nd = config["lr"]'
    assert gets_with_default(text, keys) == {"pointwise_batch_size"}
    assert gets_with_default('limits = section.get("max_queries") or {}', keys) == {"max_queries"}
    assert gets_with_default('mapping = section.get("relevance_map")', keys) == set(), "as written: None"
    assert gets_with_default("threads: config['retrieval'].get('threads', 1)", keys) == {"threads"}


def test_no_get_with_a_default_on_a_config_section_outside_the_config_modules():
    keys = config_keys()
    files = [path for path in PACKAGE.rglob("*.py") if not is_config_module(path)]
    files += [*ROOT.glob("rules/*.smk"), *ROOT.glob("scripts/*.py"), *ROOT.glob("benchmarks/*.py")]
    found = {
        (str(path.relative_to(ROOT)), key)
        for path in files
        for key in gets_with_default(path.read_text(), keys)
    }
    assert found == set(KNOWN_GETS), sorted(found ^ set(KNOWN_GETS))
