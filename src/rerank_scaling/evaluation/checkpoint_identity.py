"""What a checkpoint's scores depend on: its content, not the record of how its training went.

The evaluation caches (:mod:`.checkpoints`) key each checkpoint by :func:`checkpoint_identity`, so a
re-run of training that made the same weights (a training-code edit that changes no number)
scores nothing again, and other weights under an unchanged sidecar are scored again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rerank_scaling.data.source_digests import file_sha256

#: A checkpoint's files that do not score: its sidecar (read field by field) and the model card that
#: sentence-transformers writes beside the weights.
NOT_SCORING_FILES = ("checkpoint.json", "README.md")
#: Sidecar fields that say how the training went, not what it made.
TRAINING_TIMING = ("wall_s",)


def checkpoint_identity(ckpt: Path, sidecar: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint's scores depend on: the SHA-256 of its files (weights, configs, tokenizer;
    :data:`NOT_SCORING_FILES` aside) and its sidecar without :data:`TRAINING_TIMING`. A retrained,
    bit-identical checkpoint has the same identity; its sidecar's other fields (attention variant,
    step, run) stay in, as before."""
    files = sorted(
        path
        for path in ckpt.rglob("*")
        if path.is_file() and path.relative_to(ckpt).as_posix() not in NOT_SCORING_FILES
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(ckpt).as_posix()}\0{file_sha256(path)}\n".encode())
    kept = {key: value for key, value in sidecar.items() if key not in TRAINING_TIMING}
    return {**kept, "files_sha256": digest.hexdigest()}
