"""Atomic file writes: nothing half-written is ever left under its final name.

Every stage writes through :func:`atomic_path` (write to a temporary sibling,
then ``os.replace``), so a job killed mid-write leaves no output that Snakemake
or a later stage could mistake for a complete one. Files and directories get the permissions the
user's umask gives a newly created one (``mkstemp`` alone would leave files at 0600, unreadable for
a group sharing a project directory on a cluster), including the files a library writes into an
:func:`atomic_directory` (safetensors writes weights at 0600).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

# pandas only for the annotation: the Snakefile's parse imports this module, and pandas costs it ~0.5 s
if TYPE_CHECKING:
    import pandas as pd


def _umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    current = os.umask(0o022)
    os.umask(current)
    return current


def follow_umask(path: str | os.PathLike[str]) -> None:
    """Give a file created by ``mkstemp`` (mode 0600) the mode ``open()`` would have given it."""
    os.chmod(path, 0o666 & ~_umask())


def follow_umask_tree(root: str | os.PathLike[str]) -> None:
    """Give every directory and file under ``root`` the mode the umask gives a new one, whoever
    wrote it: safetensors writes weights through a temporary file of mode 0600, and ``copy2`` keeps
    that mode. A file left without write permission (made read-only on purpose) stays read-only,
    an executable one executable; links are left alone."""
    mask = _umask()
    for path in Path(root).rglob("*"):
        if path.is_symlink():
            continue
        mode = os.stat(path).st_mode
        if path.is_dir():
            os.chmod(path, 0o777 & ~mask)
            continue
        wanted = 0o777 if mode & 0o111 else 0o666
        if not mode & 0o200:
            wanted &= ~0o222
        os.chmod(path, wanted & ~mask)


@contextlib.contextmanager
def naming_path(target: str | os.PathLike[str]) -> Iterator[None]:
    """Re-raise an OS error of the block that names no file (a full disk says only "[Errno 28] No
    space left on device") naming ``target``, the path being written."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, f"{target}: {err.strerror}") from err


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with naming_path(target):
            yield tmp
            follow_umask(tmp)
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty staging directory next to ``path``; it replaces ``path`` only if the block succeeds.

    A kill inside the block leaves ``path`` as it was (absent or complete) and a ``.<name>.partial``
    sibling, which the next call removes. The swap itself is two renames, never a half-copied tree.
    What the block wrote gets the umask's modes (:func:`follow_umask_tree`), whichever library wrote it.
    """
    target = Path(path)
    staging = target.with_name(f".{target.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    with naming_path(target):
        yield staging
    follow_umask_tree(staging)
    if target.exists():
        # rename the old tree aside first: removing it in place could be cut short by a kill
        stale = target.with_name(f".{target.name}.stale")
        if stale.exists():
            shutil.rmtree(stale)
        os.replace(target, stale)
        shutil.rmtree(stale)
    os.replace(staging, target)


def copy_file(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Copy ``source`` to ``target`` atomically (content only, not the source's mode or times)."""
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n")


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a table atomically; the format follows the suffix (.parquet, .csv, .tsv, .md)."""
    suffix = Path(path).suffix
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            df.to_csv(tmp, index=False)
        elif suffix == ".tsv":
            df.to_csv(tmp, index=False, sep="\t")
        elif suffix == ".md":
            tmp.write_text(df.to_markdown(index=False) + "\n", encoding="utf-8")
        else:
            raise ValueError(f"write_table: unsupported suffix {suffix!r} for {path}")
