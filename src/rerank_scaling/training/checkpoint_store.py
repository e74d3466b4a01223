"""Where a training run keeps its state and checkpoints so that a kill at any moment costs little.

Two places, because Snakemake deletes the declared outputs of a failed or incomplete job:

* the *work* directory (``work/train/<run>``, not a Snakemake output, so it survives) holds the
  trainer's resume state (``trainer/checkpoint-<step>``: optimizer, scheduler, RNG, weights) and a
  copy of every exported checkpoint (``exports/ckpt-XX``: weights, tokenizer, sidecar);
* the *checkpoints* directory (``results/<name>/checkpoints/<run>``, the job's outputs) holds the
  published checkpoints, ``ckpt-XX/`` with the ``checkpoint.json`` sidecar that Snakemake tracks.
  Publishing hard-links the export's files (a copy where links are impossible), so it costs no
  disk and no time, and can be redone whenever Snakemake has removed a published checkpoint.

Invariants that make any kill safe: an export is complete when its directory exists (it is
renamed into place); a trainer state is complete when its ``progress.json`` exists (written last);
every checkpoint at or before the latest complete state has its export (exports are written before
the state's ``progress.json``); older states are removed only after a newer one is complete. A
fingerprint of the run's settings and data (``fingerprint.json``) makes a re-run with other
settings start afresh instead of resuming a different run's state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rerank_scaling.atomic import atomic_directory, write_json

log = logging.getLogger(__name__)

SIDECAR = "checkpoint.json"
PROGRESS = "progress.json"  # written last into a trainer state: marks it complete
# Files of a trainer state that are not part of an exported model.
TRAINER_STATE_FILES = (
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    "trainer_state.json",
    "training_args.bin",
    "rng_state.pth",
    PROGRESS,
)


def checkpoint_name(index: int) -> str:
    """Directory name of the ``index``-th checkpoint (1-based): ``ckpt-01``."""
    return f"ckpt-{index:02d}"


def file_digest(paths: Iterable[str | os.PathLike[str]]) -> str:
    """SHA-256 over the contents of ``paths`` (in the order given)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(source, target)


@dataclass(frozen=True)
class RunStore:
    """The work and checkpoints directories of one training run."""

    work: Path
    checkpoints: Path

    @property
    def trainer_dir(self) -> Path:
        return self.work / "trainer"

    @property
    def exports_dir(self) -> Path:
        return self.work / "exports"

    def prepare(self, fingerprint: dict[str, Any]) -> None:
        """Create the work directory; discard its contents if they belong to other settings or data."""
        marker = self.work / "fingerprint.json"
        # no marker: nothing saved yet, or a state of an older layout that cannot be resumed
        if not marker.exists() or json.loads(marker.read_text()) != fingerprint:
            if self.trainer_dir.exists() or self.exports_dir.exists():
                log.warning("%s holds state of other settings or data: starting afresh", self.work)
            for sub in (self.trainer_dir, self.exports_dir):
                shutil.rmtree(sub, ignore_errors=True)
        self.trainer_dir.mkdir(parents=True, exist_ok=True)
        self.exports_dir.mkdir(parents=True, exist_ok=True)
        write_json(marker, fingerprint)

    def states(self) -> list[Path]:
        """Trainer states by step, complete or not."""
        found = self.trainer_dir.glob("checkpoint-*")
        return sorted((p for p in found if p.name.split("-")[1].isdigit()), key=lambda p: int(p.name[11:]))

    def latest_state(self) -> Path | None:
        """The newest complete trainer state; incomplete ones (killed mid-save) are removed."""
        latest = None
        for state in self.states():
            if (state / PROGRESS).exists():
                latest = state
            else:
                log.info("removing %s: its save was interrupted", state)
                shutil.rmtree(state)
        return latest

    def complete_state(self, state: Path, progress: dict[str, Any]) -> None:
        """Mark ``state`` complete (its progress written last), then drop the older states."""
        write_json(state / PROGRESS, progress)
        for older in self.states():
            if older != state:
                shutil.rmtree(older)

    def export(self, state: Path, index: int, sidecar: dict[str, Any]) -> None:
        """Copy the model files of ``state`` (no optimizer state) to ``exports/ckpt-XX`` atomically."""
        with atomic_directory(self.exports_dir / checkpoint_name(index)) as staging:
            for source in state.iterdir():
                if source.name in TRAINER_STATE_FILES:
                    continue
                copy = shutil.copytree if source.is_dir() else shutil.copy2
                copy(source, staging / source.name)
            write_json(staging / SIDECAR, sidecar)
            fault_point("export", index)

    def publish(self, index: int) -> dict[str, Any]:
        """Make ``checkpoints/ckpt-XX`` the export's files; the sidecar is written last (fresh mtime)."""
        export = self.exports_dir / checkpoint_name(index)
        sidecar = json.loads((export / SIDECAR).read_text())
        target = self.checkpoints / checkpoint_name(index)
        with atomic_directory(target) as staging:
            for source in export.rglob("*"):
                if source.name == SIDECAR and source.parent == export:
                    continue
                copy = staging / source.relative_to(export)
                if source.is_dir():
                    copy.mkdir(parents=True, exist_ok=True)
                else:
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    _link_or_copy(source, copy)
        write_json(target / SIDECAR, sidecar)
        return sidecar

    def republish_missing(self, indices: Iterable[int]) -> list[int]:
        """Publish every exported checkpoint whose sidecar is missing (Snakemake removed it)."""
        done = []
        for index in indices:
            exported = (self.exports_dir / checkpoint_name(index) / SIDECAR).exists()
            published = (self.checkpoints / checkpoint_name(index) / SIDECAR).exists()
            if exported and not published:
                self.publish(index)
                done.append(index)
        if done:
            log.info("re-published checkpoints %s from %s", done, self.exports_dir)
        return done


FAULT_VARIABLE = "RERANK_SCALING_FAULT"
FAULT_ACTIONS = ("kill", "term", "hold")


def fault_point(point: str, index: int, released: Callable[[], bool] = lambda: False) -> None:
    """Test hook: act at ``point`` ``index`` when ``$RERANK_SCALING_FAULT`` is ``<point>:<index>[:<action>]``.

    Actions: ``kill`` (default) sends SIGKILL to this process; ``term`` sends SIGTERM (as SLURM does
    before a time-limit kill or a preemption); ``hold`` waits until ``released()`` (e.g. a SIGTERM
    arrived) or 600 s have passed, so a test can kill or ``scancel`` a job at a known moment.
    The kill tests drive the real workflow with it; unset, it does nothing.
    """
    wanted = os.environ.get(FAULT_VARIABLE, "").split(":")
    if wanted[:2] != [point, str(index)]:
        return
    action = wanted[2] if len(wanted) > 2 else "kill"
    if action not in FAULT_ACTIONS:
        raise ValueError(f"${FAULT_VARIABLE}: unknown action {action!r}; use one of {FAULT_ACTIONS}")
    log.warning("fault injection: %s at %s %d (pid %d)", action, point, index, os.getpid())
    for handler in logging.getLogger().handlers:
        handler.flush()
    if action == "hold":
        deadline = time.monotonic() + 600
        while not released() and time.monotonic() < deadline:
            time.sleep(0.1)
        return
    os.kill(os.getpid(), signal.SIGTERM if action == "term" else signal.SIGKILL)
