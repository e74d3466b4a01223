"""Where a training run keeps its state and checkpoints so that a kill at any moment costs little.

Two places, because Snakemake deletes the declared outputs of a failed or incomplete job:

* the *work* directory (``work/train/<run>``, not a Snakemake output, so it survives) holds the
  trainer's resume state (``trainer/checkpoint-<step>``: optimizer, scheduler, RNG, weights) and
  every exported checkpoint (``exports/ckpt-XX``: weights, tokenizer, sidecar), whose files are hard
  links to its state's (:func:`link_or_copy`: a state's files are written once, never in place, so
  the export costs no second write of the weights and outlives the state's removal);
* the *checkpoints* directory (``results/<name>/checkpoints/<run>``, the job's outputs) holds the
  published checkpoints, ``ckpt-XX/`` with the ``checkpoint.json`` sidecar that Snakemake tracks.
  Publishing copies the export's files (a published file damaged in place cannot damage the copy
  training resumes from), but links a file identical to the previous published checkpoint's (the
  frozen weights, :mod:`.model_saves`), and is redone whenever Snakemake has removed a published
  checkpoint.

Every file is verified: an export's sidecar and a trainer state's ``progress.json`` record the
SHA-256 and size of each of its files (:func:`file_records`). Evaluation checks a published
checkpoint against its sidecar before scoring it, the workflow checks the sizes at parse time
(:func:`check_published`), and a resumed run first drops an export or state that fails its
records, with every state after it (:meth:`RunStore.discard_damaged`), so it resumes from the last
verified state. A damaged checkpoint is an error naming the file and the repair
(:func:`repair_hint`): remove its sidecar, so that Snakemake re-runs the training job, which
re-publishes it from its verified export.

Invariants that make any kill safe: an export is complete when its directory exists (it is
renamed into place); a trainer state is complete when its ``progress.json`` exists (written last);
every checkpoint at or before the latest complete state has its export (exports are written before
the state's ``progress.json``); older states are removed only after a newer one is complete. A
fingerprint of the run's settings, data and code (``fingerprint.json``) makes a re-run with other
settings or code start afresh instead of resuming a different run's state.
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
from rerank_scaling.data.source_digests import file_sha256

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


def link_or_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """``target`` as a hard link to ``source``, or a copy where the file system has no hard links
    (a ``shutil.copytree`` ``copy_function``)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def place_model_files(
    state: Path, target: Path, place: Callable[[Path, Path], object] = link_or_copy
) -> None:
    """Put each file of ``state`` but the trainer's own (:data:`TRAINER_STATE_FILES`) into the
    existing folder ``target`` by ``place`` (source, destination), subfolders included."""
    for source in state.iterdir():
        if source.name in TRAINER_STATE_FILES:
            continue
        if source.is_dir():
            shutil.copytree(source, target / source.name, copy_function=place)
        else:
            place(source, target / source.name)


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


#: Key of the file records (:func:`file_records`) in a sidecar and in a state's progress.
FILES = "files"


def file_records(directory: Path) -> dict[str, dict[str, Any]]:
    """``{path inside directory: {"sha256", "bytes"}}`` of every file of a checkpoint or trainer
    state but its record itself (the sidecar, the progress file)."""
    return {
        path.relative_to(directory).as_posix(): {"sha256": file_sha256(path), "bytes": path.stat().st_size}
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.relative_to(directory).as_posix() not in (SIDECAR, PROGRESS)
    }


def damaged_file(directory: Path, records: dict[str, dict[str, Any]], hashing: bool = True) -> str | None:
    """Why the first file of ``directory`` that fails its record is damaged (missing, another size,
    another SHA-256; without ``hashing``, sizes only: a stat per file), or None."""
    for name, record in records.items():
        path = directory / name
        if not path.is_file():
            return f"{path}: missing"
        size = path.stat().st_size
        if size != record["bytes"]:
            return f"{path}: {size} bytes where {record['bytes']} are recorded"
        if hashing and file_sha256(path) != record["sha256"]:
            return f"{path}: its SHA-256 is not the one recorded"
    return None


def repair_hint(checkpoint: Path, *more: Path) -> str:
    """The repair of damaged published checkpoints, as the command to run."""
    sidecars = " ".join(str(path / SIDECAR) for path in (checkpoint, *more))
    return (
        f"repair {'them' if more else 'it'} from the training run's last verified state: rm {sidecars} "
        f"and run snakemake again (it re-runs that run's training job, which re-publishes "
        f"{'each checkpoint' if more else 'the checkpoint'} from its verified copy, or re-trains it "
        "from the last verified trainer state)"
    )


class CheckpointDamaged(ValueError):
    """A published checkpoint's file fails the record of its sidecar."""


def verify_published(checkpoint: Path, sidecar: dict[str, Any], hashing: bool = True) -> None:
    """Raise :class:`CheckpointDamaged`, naming the file and :func:`repair_hint`, if a file of
    ``checkpoint`` fails its sidecar's records (a sidecar without them, from before they were
    recorded, passes)."""
    damage = damaged_file(checkpoint, sidecar.get(FILES, {}), hashing)
    if damage:
        raise CheckpointDamaged(f"damaged checkpoint: {damage} by its {SIDECAR}; {repair_hint(checkpoint)}")


def check_published(checkpoints: Path, runs: Iterable[str]) -> None:
    """Parse time: the sizes of every published checkpoint of ``runs`` under ``checkpoints``
    against their sidecars (a stat per file; evaluation checks the SHA-256). One error names every
    damaged checkpoint and one repair for all of them: a file the published checkpoints of a run
    share (:meth:`RunStore.publish`) damages each of them."""
    damaged: list[tuple[Path, str]] = []
    for run in runs:
        for sidecar in sorted((checkpoints / run).glob(f"ckpt-*/{SIDECAR}")):
            try:
                recorded = json.loads(sidecar.read_text())
            except (OSError, ValueError) as error:
                damaged.append((sidecar.parent, f"{sidecar}: {error}"))
                continue
            damage = damaged_file(sidecar.parent, recorded.get(FILES, {}), hashing=False)
            if damage:
                damaged.append((sidecar.parent, f"{damage} by its {SIDECAR}"))
    if damaged:
        found = "; ".join(why for _, why in damaged)
        plural = "s" if len(damaged) > 1 else ""
        raise CheckpointDamaged(
            f"damaged checkpoint{plural}: {found}; {repair_hint(*(c for c, _ in damaged))}"
        )


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
        """Create the work directory; discard its contents if they belong to other settings, data or
        code."""
        marker = self.work / "fingerprint.json"
        # no marker: nothing saved yet, or a state of an older layout that cannot be resumed
        if not marker.exists() or json.loads(marker.read_text()) != fingerprint:
            if self.trainer_dir.exists() or self.exports_dir.exists():
                log.warning("%s holds state of other settings, data or code: starting afresh", self.work)
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

    def discard_damaged(self) -> None:
        """Drop the first export that fails its sidecar's records, every later export and every
        trainer state from its step on, then a latest state that fails its progress' records: what
        is left resumes from the last verified state (a checkpoint's weights exist only in the
        state saved with it, so an earlier export's damage drops the states after it)."""
        exports = sorted(self.exports_dir.glob(f"ckpt-*/{SIDECAR}"))
        for position, sidecar_file in enumerate(exports):
            sidecar = json.loads(sidecar_file.read_text())
            damage = damaged_file(sidecar_file.parent, sidecar.get(FILES, {}))
            if damage:
                step = sidecar["step"]
                log.warning("%s: discarding it, the later exports and the states from step %d", damage, step)
                for later in exports[position:]:
                    shutil.rmtree(later.parent)
                for state in self.states():
                    if int(state.name.split("-")[1]) >= step:
                        shutil.rmtree(state)
                break
        latest = self.latest_state()
        if latest is not None:
            damage = damaged_file(latest, json.loads((latest / PROGRESS).read_text()).get(FILES, {}))
            if damage:
                log.warning("%s: discarding the trainer state %s", damage, latest)
                shutil.rmtree(latest)

    def complete_state(
        self, state: Path, progress: dict[str, Any], records: dict[str, dict[str, Any]] | None = None
    ) -> None:
        """Mark ``state`` complete (its progress, with its files' records, written last), then drop
        the older states. ``records``: :func:`file_records` of ``state`` when the caller has them
        (:meth:`export` took them too), else hashed here."""
        write_json(state / PROGRESS, {**progress, FILES: file_records(state) if records is None else records})
        for older in self.states():
            if older != state:
                shutil.rmtree(older)

    def export(
        self,
        state: Path,
        index: int,
        sidecar: dict[str, Any],
        records: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Link the model files of ``state`` (no optimizer state) into ``exports/ckpt-XX`` atomically
        (:func:`link_or_copy`); its sidecar records each file's SHA-256 and size. ``records``:
        :func:`file_records` of ``state``, whose model files' records are the export's (each file
        hashed once per checkpoint: the record is the trained file's, so an export that differs fails
        it), else the export's files hashed here."""
        with atomic_directory(self.exports_dir / checkpoint_name(index)) as staging:
            place_model_files(state, staging)
            if records is None:
                records = file_records(staging)
            kept = {
                name: r for name, r in records.items() if name.split("/", 1)[0] not in TRAINER_STATE_FILES
            }
            write_json(staging / SIDECAR, {**sidecar, FILES: kept})
            fault_point("export", index)

    def publish(self, index: int) -> dict[str, Any]:
        """Make ``checkpoints/ckpt-XX`` a copy of the export's files; the sidecar is written last
        (fresh mtime). A file with the same record as the same file of the previous published
        checkpoint (the frozen weights of :mod:`.model_saves`, the tokenizer) is a hard link to
        that file once its bytes pass the record (:meth:`identical_published`), not another copy:
        published checkpoints of a run may share a file, never with the export training resumes from."""
        export = self.exports_dir / checkpoint_name(index)
        sidecar = json.loads((export / SIDECAR).read_text())
        target = self.checkpoints / checkpoint_name(index)
        shared = self.identical_published(index, sidecar.get(FILES, {}))
        with atomic_directory(target) as staging:
            for source in export.rglob("*"):
                if source.name == SIDECAR and source.parent == export:
                    continue
                name = source.relative_to(export).as_posix()
                copy = staging / name
                if source.is_dir():
                    copy.mkdir(parents=True, exist_ok=True)
                    continue
                copy.parent.mkdir(parents=True, exist_ok=True)
                if name in shared:
                    link_or_copy(shared[name], copy)
                else:
                    shutil.copy2(source, copy)
        write_json(target / SIDECAR, sidecar)
        return sidecar

    def identical_published(self, index: int, records: dict[str, dict[str, Any]]) -> dict[str, Path]:
        """``{name: file}``: each file of the previous published checkpoint (``index`` - 1) whose
        sidecar records it as ``records`` do and whose bytes pass that record (SHA-256 and size)."""
        previous = self.checkpoints / checkpoint_name(index - 1)
        if index < 2 or not (previous / SIDECAR).is_file():
            return {}
        try:
            recorded = json.loads((previous / SIDECAR).read_text()).get(FILES, {})
        except (OSError, ValueError):
            return {}
        return {
            name: previous / name
            for name, record in records.items()
            if recorded.get(name) == record and damaged_file(previous, {name: record}) is None
        }

    def republish_missing(self, indices: Iterable[int]) -> list[int]:
        """Publish every exported checkpoint whose sidecar is missing (Snakemake removed it) or
        whose files' sizes differ from the export's records."""
        done = []
        for index in indices:
            exported = self.exports_dir / checkpoint_name(index) / SIDECAR
            published = self.checkpoints / checkpoint_name(index)
            if exported.exists() and (
                not (published / SIDECAR).exists()
                or damaged_file(published, json.loads(exported.read_text()).get(FILES, {}), hashing=False)
            ):
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
