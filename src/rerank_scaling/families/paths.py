"""Where a ``models[].path`` points: a directory inside an installed package, a hub id's cached
snapshot or a local directory, and the ``config.json`` found there (read without loading the model)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from rerank_scaling.hub.cache import cached_model, is_hub_id, model_source


def resolve_path(path: str) -> str:
    """``package:<module>/<subdir>`` -> a directory inside an installed package; a hub id -> its
    cached snapshot (offline and not cached: :class:`rerank_scaling.hub.cache.ModelNotCached`, naming the
    prefetch command); a local directory unchanged."""
    if is_hub_id(path):
        return model_source(path)
    if not path.startswith("package:"):
        return path
    module, _, subdir = path.removeprefix("package:").partition("/")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"models[].path: package {module!r} is not installed (pip install it)")
    return str(Path(spec.submodule_search_locations[0]) / subdir)


def config_at(path: str) -> dict[str, Any] | None:
    """The ``config.json`` of the model at ``path``; None where it cannot be read yet (a hub id not
    prefetched, a package that is not installed: both reported where the model is loaded)."""
    if is_hub_id(path):
        directory = cached_model(path)
    else:
        try:
            directory = Path(os.path.expanduser(resolve_path(path)))
        except FileNotFoundError:
            directory = None
    if directory is None or not (directory / "config.json").exists():
        return None
    return json.loads((directory / "config.json").read_text())
