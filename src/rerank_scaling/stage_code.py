"""The library files behind a stage, read from its imports, and the digest file of their code: the
code input of its rules.

Snakemake re-runs a job when its shell text, params or input files change, not when a module it
imports changes, so every rule lists its stage's code digest among its inputs (``rules/common.smk``,
:func:`record_stage_digest`): one small file per stage, rewritten at parse time only when the code
changes. Its lines are each module's digest (:func:`module_digest`: the syntax tree, without
docstrings), so a comment, a docstring or a reformatting re-runs nothing, and neither does a file
rewritten with the same code: Snakemake checksums inputs under 1 MB and lets a newer one with the
recorded checksum pass (``--max-checksum-file-size``), as it does the data's digest files
(:mod:`.data.source_digests`). Any other edit re-runs the stage and its dependants. (The package's
docstrings reach no output: only ``--help`` texts read them; ``tests/test_stage_code.py`` keeps it so.)

The list of modules is derived from the layout instead of kept by hand: a stage's code is its
entry module (e.g. ``data.prepare_data``) and every package module it imports, transitively: modules
of its own subpackage, the shared modules at the top, and what it uses of other subpackages (the figure
helpers of :mod:`.plotting`, say). Editing any of them re-runs the stage and its dependants;
editing a module the stage never imports re-runs nothing of it.

Imports are read with :mod:`ast`; nothing is imported, so parsing the Snakefile stays fast and loads
no torch. An import inside a function counts like one at module level (that is how a stage loads
an optional part: the sparse encoder only for windowed runs). No stage imports the workflow layer
(:mod:`rerank_scaling.workflow`, the parse-time checks that reach into every family): it is the top
floor (``tests/test_architecture.py``), so none of its code is any stage's. Package ``__init__``
files hold only a docstring (``tests/test_stage_code.py`` keeps it so) and are left out, so that
describing a package re-runs nothing.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import sys
from pathlib import Path

from rerank_scaling.atomic import write_text

PACKAGE = "rerank_scaling"
#: Compiled code a module builds and loads, by module (dotted, from the package): a folder of the
#: checkout (beside ``src``) whose C++/CUDA files are code of every stage that imports the module,
#: so that editing a kernel re-runs what it computes, as editing a Python module does.
COMPILED_SOURCES = {"compute.extension_build": "kernels/window_attention"}
COMPILED_SUFFIXES = (".cpp", ".h", ".cu", ".cuh")
#: One import statement as read from a file: (``from``-import?, level, module, names).
RawImport = tuple[bool, int, str, tuple[str, ...]]


def module_file(module: str, source: Path) -> Path | None:
    """The file of ``module`` (dotted, from the package) under ``source``, or None if it has none."""
    base = source.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _imported(statement: RawImport, module: str, is_package: bool, source: Path) -> list[str]:
    """The modules one import statement of ``module`` names."""
    from_import, level, named, aliases = statement
    if not from_import:
        return list(aliases)
    if level:  # relative: from the module's own package, one package up per further dot
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (level - 1)]
        base = ".".join([*parts, named] if named else parts)
    else:
        base = named
    # `from package import module` names the module; `from module import name` the module only
    names = [f"{base}.{alias}" for alias in aliases]
    return [name for name in names if module_file(name, source) is not None] or [base]


def _stamp(path: Path) -> tuple[int, int]:
    """What changes with a file's content, for the per-process caches: (mtime in ns, size)."""
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def package_imports(path: Path, module: str, source: Path) -> tuple[frozenset[str], frozenset[str]]:
    """The package modules ``module`` (at ``path``) imports: (at module level, inside functions).
    Read once per process and version of the file: stages share most of their modules."""
    return _package_imports(path, module, source, _stamp(path))


@functools.cache
def _package_imports(
    path: Path, module: str, source: Path, stamp: tuple[int, int]
) -> tuple[frozenset[str], frozenset[str]]:
    is_package = path.name == "__init__.py"
    at_top: set[str] = set()
    in_functions: set[str] = set()
    for *statement, in_function in _parsed(path, stamp)["imports"]:
        names = _imported(tuple(statement), module, is_package, source)
        ours = {name for name in names if name == PACKAGE or name.startswith(PACKAGE + ".")}
        (in_functions if in_function else at_top).update(ours)
    return frozenset(at_top), frozenset(in_functions)


def _cache_dir() -> Path:
    """Where :func:`_parsed` keeps what it read, for every later process: ``$RERANK_SCALING_CACHE``,
    else ``$XDG_CACHE_HOME/rerank-scaling`` (``~/.cache``), then ``stage-code``."""
    root = os.environ.get("RERANK_SCALING_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "rerank-scaling"
    )
    return Path(root) / "stage-code"


@functools.cache
def _reader_version() -> str:
    """What else decides what :func:`_parsed` reads from a file's bytes: this module's own code and
    the Python version (:func:`ast.dump`'s format follows it)."""
    return hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode()).hexdigest()


@functools.cache
def _parsed(path: Path, stamp: tuple[int, int]) -> dict:
    """What the stage code reads from a module: its code digest (:func:`module_digest`) and its
    import statements (``[from-import?, level, module, names, inside a function?]``), read once per
    version of its bytes and kept under :func:`_cache_dir`: every Snakemake start (each dry run,
    each cluster job) and each job's :func:`running_code_digest` then read one small file per module
    instead of parsing ~120. The key is the SHA-256 of the bytes and of :func:`_reader_version`, so
    an entry never outlives the code it describes; a missing, unreadable or unwritable cache only
    costs the parse."""
    data = path.read_bytes()
    key = hashlib.sha256(_reader_version().encode() + data).hexdigest()
    entry = _cache_dir() / key[:2] / f"{key}.json"
    try:
        return json.loads(entry.read_text())
    except (OSError, ValueError):
        pass
    tree = ast.parse(data, filename=str(path))
    imports: list[list] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                imports.append([False, 0, "", [alias.name for alias in child.names], in_function])
            elif isinstance(child, ast.ImportFrom):
                names = [alias.name for alias in child.names]
                imports.append([True, child.level, child.module or "", names, in_function])
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    parsed = {"digest": _tree_digest(tree), "imports": imports}
    with contextlib.suppress(OSError):
        write_text(entry, json.dumps(parsed))
    return parsed


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
        todo += at_top | in_functions
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


def module_digest(path: Path) -> str:
    """SHA-256 of a module's code: its syntax tree (:func:`ast.dump`, no line numbers) with every
    docstring removed. Comments and layout are not in the tree."""
    return _module_digest(path, _stamp(path))


def _module_digest(path: Path, stamp: tuple[int, int]) -> str:
    return _parsed(path, stamp)["digest"]


def _tree_digest(tree: ast.Module) -> str:
    """SHA-256 of :func:`ast.dump` of ``tree`` with its docstrings removed (in place)."""
    scopes = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    for node in ast.walk(tree):
        if isinstance(node, scopes) and node.body and _is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def stage_digest(entry: str, source: str | Path = "src", leave_out: tuple[str, ...] = ()) -> str:
    """The code of a stage as text: a ``<module digest>  <path>`` line per file of
    :func:`stage_code` (a file added to the stage, or removed, changes it too), but the modules
    ``leave_out`` (dotted, from the package: ``"evaluation.metrics"``), then a ``<SHA-256>  <path>``
    line per compiled source of those modules (:data:`COMPILED_SOURCES`; every byte counts: a C++
    comment re-runs the stage, since the build does not parse them)."""
    source = Path(source)
    left_out = {module_file(f"{PACKAGE}.{module}", source) for module in leave_out}
    files = [Path(path) for path in stage_code(entry, source) if Path(path) not in left_out]
    lines = [f"{module_digest(path)}  {path.relative_to(source).as_posix()}" for path in files]
    modules = {path.relative_to(source).with_suffix("").as_posix().replace("/", ".") for path in files}
    for module, folder in sorted(COMPILED_SOURCES.items()):
        if f"{PACKAGE}.{module}" in modules:
            lines += compiled_lines(source.parent, folder)
    return "\n".join(lines) + "\n"


def compiled_lines(checkout: Path, folder: str) -> list[str]:
    """``<SHA-256>  <path>`` of each compiled source under ``checkout/folder`` (none where the
    folder is absent: a package installed without its kernels builds none)."""
    paths = sorted(p for p in (checkout / folder).rglob("*") if p.suffix in COMPILED_SUFFIXES)
    return [
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(checkout).as_posix()}"
        for path in paths
    ]


def running_code_digest(entry: str, leave_out: tuple[str, ...] = ()) -> str:
    """SHA-256 of :func:`stage_digest` of ``entry`` (but ``leave_out``) in the package this process
    imports: what a job's own caches key their entries by (the trainer's resume state, the
    evaluation caches), so an entry made by other code never serves, and one made by the same code
    (a comment or a docstring edited since) still does. The package read is the one running, which
    is not always the checkout's ``src`` that the rules' code inputs digest."""
    source = Path(__file__).resolve().parent.parent
    return hashlib.sha256(stage_digest(entry, source, leave_out).encode()).hexdigest()


def record_stage_digest(entry: str, out_dir: str | Path, source: str | Path = "src") -> Path:
    """``out_dir/<entry>.code``: :func:`stage_digest`, written (atomically) only when it differs from
    what the file holds, so its modification time moves only with the code."""
    target = Path(out_dir) / f"{entry}.code"
    text = stage_digest(entry, source)
    if not target.exists() or target.read_text() != text:
        write_text(target, text)
    return target
