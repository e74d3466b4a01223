"""Hub downloads on the submitting node, offline compute jobs: find, fetch and check what a config names.

On most clusters compute nodes have no internet while the login node does. The prefetch step
(``./run.sh --prefetch --configfile CONFIG``, the local rule ``prefetch``) downloads every Hugging
Face model and every ir_datasets id the config names into the caches the jobs read
(``$HF_HUB_CACHE`` / ``$HF_HOME/hub`` in the hub's own layout ``models--org--name/snapshots/<rev>/``,
and ``$IR_DATASETS_HOME``); compute jobs then run with ``HF_HUB_OFFLINE=1`` (set by their rules),
and a model missing from the cache fails with :class:`ModelNotCached`, which names the model and
the prefetch command. With ``HF_HUB_OFFLINE=1`` in its own environment the prefetch only checks
the caches (nothing is downloaded) and fails if anything is missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PREFETCH_COMMAND = "./run.sh --prefetch --configfile <your config>  (on a node with internet)"
# org/name, optionally pinned to a revision: org/name@<commit sha> (or a tag or branch).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?(@[\w.-]+)?$")
# What a cross-encoder needs from a model repository (not ONNX/flax/GGUF copies of the weights).
_MODEL_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "*.py"]


class ModelNotCached(FileNotFoundError):
    """A hub model is not in the local cache and the job may not download it."""


@dataclass(frozen=True)
class FetchRecord:
    """One thing the config names and where it stands: cached, downloaded, local, or missing."""

    kind: str  # "model" | "dataset"
    name: str  # hub id or ir_datasets id
    status: str
    location: str  # snapshot directory, cache home, or the error

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set (read now, not at import: tests and jobs set it late)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_cache() -> Path:
    """The hub cache directory, resolved as huggingface_hub does: HF_HUB_CACHE, else HF_HOME/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = (
        os.environ.get("HF_HOME")
        or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "huggingface"
    )
    return Path(home) / "hub"


def is_hub_id(path: str) -> bool:
    """A ``models[].path`` that names a hub repository: not ``package:``, not an existing directory."""
    return not path.startswith("package:") and not Path(path).exists() and bool(_HUB_ID.match(path))


def split_revision(path: str) -> tuple[str, str | None]:
    """``org/name@<revision>`` -> (``org/name``, revision); without ``@``: (path, None), the
    repository's ``main`` at the time of the prefetch. A commit sha pins the weights and tokenizer
    every job loads, so a later push to the repository changes nothing in a running grid."""
    repo_id, _, revision = path.partition("@")
    return repo_id, revision or None


def hub_model_ids(config: dict[str, Any]) -> list[str]:
    """Hub ids among the config's ``models[].path`` (families ``hf`` and ``ladder``), sorted."""
    return sorted({m["path"] for m in config["models"] if "path" in m and is_hub_id(m["path"])})


def ir_dataset_ids(config: dict[str, Any]) -> list[str]:
    """ir_datasets ids the config names: the corpus and every split's queries/qrels."""
    dataset = config["dataset"]
    if dataset["source"] != "ir_datasets":
        return []
    section = dataset["ir_datasets"]
    return sorted({section["corpus"], *section["splits"].values()})


#: Files a tokenizer can be loaded from (a fast tokenizer's JSON, or a vocabulary).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")
#: Weight files of a single-file checkpoint; a sharded one lists its shards in an index JSON.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def snapshot_missing(snapshot: Path) -> list[str]:
    """What a snapshot lacks for a job to load the model offline: its ``config.json``, its weights
    (every shard an index names) or a tokenizer. A snapshot left by an earlier download of only the
    config or the tokenizer is not a cached model."""
    missing = [] if (snapshot / "config.json").is_file() else ["config.json"]
    indexes = [snapshot / name for name in WEIGHT_INDEXES if (snapshot / name).is_file()]
    if indexes:
        import json

        shards = set(json.loads(indexes[0].read_text()).get("weight_map", {}).values())
        missing += sorted(f"weights ({shard})" for shard in shards if not (snapshot / shard).is_file())
    elif not any((snapshot / name).is_file() for name in WEIGHT_FILES):
        missing.append(f"weights ({' or '.join(WEIGHT_FILES)})")
    if not any((snapshot / name).is_file() for name in TOKENIZER_FILES):
        missing.append(f"tokenizer ({', '.join(TOKENIZER_FILES)})")
    return missing


def cached_snapshot(repo_id: str) -> Path | None:
    """The snapshot directory of ``repo_id`` (``org/name[@revision]``; no revision: ``refs/main``)
    in the hub cache, complete or not."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    name, revision = split_revision(repo_id)
    try:
        return Path(snapshot_download(name, revision=revision, cache_dir=hub_cache(), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        return None


def cached_model(repo_id: str) -> Path | None:
    """The snapshot directory of ``repo_id`` in the hub cache when it holds all a job loads
    (:func:`snapshot_missing` is empty), else None."""
    path = cached_snapshot(repo_id)
    return path if path is not None and not snapshot_missing(path) else None


def model_source(path: str) -> str:
    """What to load for a hub ``models[].path``: the cached snapshot, or (online) the id itself.

    Offline and not cached: :class:`ModelNotCached`, naming the model and the prefetch command.
    """
    snapshot = cached_model(path)
    if snapshot is not None:
        return str(snapshot)
    if hub_offline():
        raise ModelNotCached(
            f"models[].path: {path!r} is not a local directory and not in the Hugging Face cache "
            f"{hub_cache()} (models--{split_revision(path)[0].replace('/', '--')}/), and this job runs "
            f"offline (HF_HUB_OFFLINE=1). Download it first: {PREFETCH_COMMAND}"
        )
    if split_revision(path)[1] is not None:  # a pinned revision: into the cache, then from there
        return fetch_model(path).location
    return path


def fetch_model(repo_id: str) -> FetchRecord:
    """Check (offline) or download (online) one model into the hub cache."""
    snapshot = cached_model(repo_id)
    if snapshot is not None:
        return FetchRecord("model", repo_id, "cached", str(snapshot))
    if hub_offline():
        partial = cached_snapshot(repo_id)
        where = (
            f"incomplete snapshot {partial}: no {', no '.join(snapshot_missing(partial))}"
            if partial is not None
            else f"not in {hub_cache()}"
        )
        return FetchRecord("model", repo_id, "missing", f"{where}, and HF_HUB_OFFLINE=1")
    from huggingface_hub import list_repo_files, snapshot_download

    name, revision = split_revision(repo_id)
    patterns = list(_MODEL_FILES)
    if not any(file.endswith(".safetensors") for file in list_repo_files(name, revision=revision)):
        patterns.append("*.bin")
    path = snapshot_download(name, revision=revision, cache_dir=hub_cache(), allow_patterns=patterns)
    return FetchRecord("model", repo_id, "downloaded", str(path))


def fetch_ir_dataset(dataset_id: str) -> FetchRecord:
    """Make ir_datasets download (or find) the docs, queries and qrels of ``dataset_id``.

    Reading the first item of each part makes ir_datasets fetch and verify its source files in
    ``$IR_DATASETS_HOME``; offline, a missing file becomes a ``missing`` record with the hint of
    :mod:`rerank_scaling.hub.downloads`.
    """
    import ir_datasets

    from rerank_scaling.hub.downloads import DatasetUnavailable, guarded_download

    home = os.environ.get("IR_DATASETS_HOME", str(Path.home() / ".ir_datasets"))
    dataset = ir_datasets.load(dataset_id)
    try:
        for part in ("docs", "queries", "qrels"):
            if getattr(dataset, f"has_{part}")():
                next(iter(guarded_download(dataset_id, getattr(dataset, f"{part}_iter"))), None)
    except DatasetUnavailable as err:
        return FetchRecord("dataset", dataset_id, "missing", str(err).splitlines()[0])
    return FetchRecord("dataset", dataset_id, "available", home)


def prefetch(config: dict[str, Any]) -> list[FetchRecord]:
    """Fetch or check every hub model and ir_datasets id of ``config``; one record each."""
    return [fetch_model(m) for m in hub_model_ids(config)] + [
        fetch_ir_dataset(d) for d in ir_dataset_ids(config)
    ]


def missing_report(records: Iterable[FetchRecord]) -> str | None:
    """An error message naming every missing item and the fix, or None when all are there."""
    missing = [r for r in records if r.status == "missing"]
    if not missing:
        return None
    lines = "\n".join(f"  - {r.kind} {r.name}: {r.location}" for r in missing)
    return (
        f"prefetch: {len(missing)} item(s) missing from the local caches:\n{lines}\n"
        f"Run the prefetch with network access (HF_HUB_OFFLINE unset): {PREFETCH_COMMAND}"
    )
