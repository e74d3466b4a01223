"""The package's shape: arrows point down (no import cycle, function-level imports
included), rooms stay small (no module over 400 lines, but the ones named here with the reason) and
config defaults have one home (no ``.get("<config key>", <default>)`` outside the config and
settings modules, but the ones named here with the reason)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rerank_scaling"
MAX_LINES = 400
#: Modules still over MAX_LINES, each with why; a new one over the limit fails the test.
OVERSIZED: dict[str, str] = {}

#: ``.get("<key>", <default>)`` calls whose key is also a config key but which read no config
#: section, each with why. A new one fails the test: read the filled config (``config[...]``), or a
#: settings object (``settings_from_dict``, ``settings.with_defaults``, ``settings.model_spec``),
#: whose defaults are the schema's; a config file as written: ``settings.written_section``.
KNOWN_GETS = {
    ("src/rerank_scaling/laws/allocation.py", "planning"): "a fits-table column, not the section",
    ("src/rerank_scaling/model_pins.py", "models"): "the pin lock file's map, not the config's models",
}
#: ``.get("<key>", <default>)``, and ``.get("<key>") or <default>``, the same default in other words.
GET_WITH_DEFAULT = re.compile(r'\.get\(\s*["\']([A-Za-z_][A-Za-z0-9_]*)["\']\s*(?:,|\)\s*or\b)')


def module_name(path: Path) -> str:
    parts = ("rerank_scaling", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts).removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
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
    """The modules that own defaults: config*.py and settings.py on the ground floor."""
    return path.parent == PACKAGE and (path.name.startswith("config") or path.name == "settings.py")


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
