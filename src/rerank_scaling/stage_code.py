"""The library files behind a stage, read from its imports: the code inputs of its rules.

Snakemake re-runs a job when its shell text, params or input files change, not when a module it
imports changes, so every rule lists its stage's code among its inputs (``rules/common.smk``). The
list is derived from the layout instead of kept by hand: a stage's code is its entry module (e.g.
``data.prepare_data``) and every package module it imports, transitively: modules of its own
subpackage, the shared modules at the top, and what it uses of other subpackages (the figure
helpers of :mod:`.plotting`, say). Editing any of them re-runs the stage and its dependants;
editing a module the stage never imports re-runs nothing of it.

Imports are read with :mod:`ast`; nothing is imported, so parsing the Snakefile stays fast and loads
no torch. In the subpackages an import inside a function counts like one at module level (that is
how a stage loads an optional part: the sparse encoder only for windowed runs). In the shared
modules at the top only module-level imports count: their function-level imports serve the
parse-time config checks (:mod:`.config_checks` reaches into every family), which no job runs.
Package ``__init__`` files hold only a docstring (``tests/test_stage_code.py`` keeps it so) and are
left out, so that describing a package re-runs nothing.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = "rerank_scaling"


def module_file(module: str, source: Path) -> Path | None:
    """The file of ``module`` (dotted, from the package) under ``source``, or None if it has none."""
    base = source.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, source: Path) -> list[str]:
    """The modules one import statement of ``module`` names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: from the module's own package, one package up per further dot
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, node.module] if node.module else parts)
    else:
        base = node.module or ""
    # `from package import module` names the module; `from module import name` the module only
    names = [f"{base}.{alias.name}" for alias in node.names]
    return [name for name in names if module_file(name, source) is not None] or [base]


def package_imports(path: Path, module: str, source: Path) -> tuple[set[str], set[str]]:
    """The package modules ``module`` (at ``path``) imports: (at module level, inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    at_top: set[str] = set()
    in_functions: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                names = _imported(child, module, is_package, source)
                ours = {name for name in names if name == PACKAGE or name.startswith(PACKAGE + ".")}
                (in_functions if in_function else at_top).update(ours)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return at_top, in_functions


@functools.cache
def stage_modules(entry: str, source: Path) -> tuple[str, ...]:
    """``entry`` and every package module it imports, transitively (see the module docstring)."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        path = module_file(module, source)
        if path is None:
            raise FileNotFoundError(f"stage code: no file for module {module!r} under {source}")
        seen.add(module)
        at_top, in_functions = package_imports(path, module, source)
        shared = module.count(".") == 1 and path.name != "__init__.py"
        todo += at_top if shared else at_top | in_functions
    return tuple(sorted(seen))


def stage_code(entry: str, source: str | Path = "src") -> list[str]:
    """The files of stage entry module ``entry`` (``"data.prepare_data"``, in :data:`PACKAGE`) and
    of every package module it imports, package ``__init__`` files aside: sorted paths under
    ``source``, for a rule's input.

    ``stage_code("training.train")`` holds ``src/rerank_scaling/training/sparse_encoder.py``, which
    the training run imports only for windowed attention.
    """
    source = Path(source)
    entry = entry if entry.startswith(PACKAGE + ".") else f"{PACKAGE}.{entry}"
    paths = [module_file(module, source) for module in stage_modules(entry, source)]
    return sorted(str(path) for path in paths if path is not None and path.name != "__init__.py")
