"""Pinned revisions: the lock file ``./run.sh --prefetch --pin`` writes and the workflow reads.

The prefetch resolves each hub model the config names without a revision (``org/name``: the
repository's ``main`` at that moment) to a snapshot whose directory is named by its commit
(:func:`rerank_scaling.hub.cache.fetch_model`). With ``--pin`` it writes those commits, and the versions of
the ir_datasets package that define the datasets' downloads (ir_datasets ids carry no commit: the
package pins each file's URL and checksum), to :data:`PIN_FILE` in the working directory. The
Snakefile reads it at parse time (:func:`pinned_models`): every ``org/name`` it lists loads
``org/name@<commit>``, whatever ``main`` points to later, and a model's jobs re-run once when its pin
changes (its path is a param). Each checkpoint's sidecar names the commit its model came from
(``model_commit``, :func:`model_commit`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from rerank_scaling.atomic import write_text
from rerank_scaling.hub.cache import FetchRecord, cached_snapshot, is_hub_id, split_revision

#: The lock file, relative to the workflow's working directory.
PIN_FILE = "models.lock.yaml"


def lock_of(records: Iterable[FetchRecord]) -> dict[str, dict[str, str]]:
    """The lock of a prefetch's records: each model's commit (its snapshot directory's name) and
    the ir_datasets version behind each dataset."""
    from importlib.metadata import version

    models = {
        split_revision(r.name)[0]: Path(r.location).name
        for r in records
        if r.kind == "model" and r.status in ("cached", "downloaded")
    }
    datasets = {r.name: f"ir_datasets {version('ir_datasets')}" for r in records if r.kind == "dataset"}
    return {"models": dict(sorted(models.items())), "datasets": dict(sorted(datasets.items()))}


def write_lock(records: Iterable[FetchRecord], path: str | Path = PIN_FILE) -> None:
    """Write :func:`lock_of` ``records`` to ``path`` (YAML, atomically)."""
    header = "# Written by ./run.sh --prefetch --pin: the commit each hub model loads (model_pins)\n"
    write_text(path, header + yaml.safe_dump(lock_of(records), sort_keys=True))


def read_pins(path: str | Path = PIN_FILE) -> dict[str, str]:
    """``org/name`` -> commit from the lock file; empty when there is none."""
    path = Path(path)
    if not path.is_file():
        return {}
    lock = yaml.safe_load(path.read_text()) or {}
    models = lock.get("models") or {}
    if not isinstance(models, dict):
        raise ValueError(f"{path}: 'models' must map org/name to a commit; re-run ./run.sh --prefetch --pin")
    return {str(name): str(commit) for name, commit in models.items()}


def pinned_models(models: list[dict[str, Any]], pins: dict[str, str]) -> list[dict[str, Any]]:
    """``models`` with every hub path named without a revision that ``pins`` lists pinned to its
    commit (``org/name@<commit>``); a path with its own revision is left as written."""
    out = []
    for spec in models:
        path = spec.get("path")
        if isinstance(path, str) and is_hub_id(path) and split_revision(path)[1] is None and path in pins:
            spec = {**spec, "path": f"{path}@{pins[path]}"}
        out.append(spec)
    return out


def model_commit(spec: dict[str, Any]) -> str | None:
    """The commit of the cached snapshot a ``models[]`` entry loads (None: not a hub model, or not
    cached)."""
    path = spec.get("path")
    if not isinstance(path, str) or not is_hub_id(path):
        return None
    snapshot = cached_snapshot(path)
    return snapshot.name if snapshot is not None else None
