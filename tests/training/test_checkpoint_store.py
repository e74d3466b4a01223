"""The run store's invariants on real files (the kill tests in test_resume.py drive them end to end)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from rerank_scaling.training.checkpoint_store import (
    FILES,
    PROGRESS,
    SIDECAR,
    CheckpointDamaged,
    RunStore,
    check_published,
    file_records,
    verify_published,
)


def _state(store: RunStore, step: int, complete: bool = True):
    state = store.trainer_dir / f"checkpoint-{step}"
    state.mkdir(parents=True)
    (state / "model.safetensors").write_bytes(bytes([step]) * 8)
    (state / "optimizer.pt").write_bytes(b"adam")
    if complete:
        (state / PROGRESS).write_text(json.dumps({"step": step}))
    return state


def test_latest_complete_state_wins_and_interrupted_saves_are_removed(tmp_path):
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    _state(store, 2)
    _state(store, 4, complete=False)
    assert store.latest_state().name == "checkpoint-2"
    assert [p.name for p in store.states()] == ["checkpoint-2"]
    newer = _state(store, 6, complete=False)
    store.complete_state(newer, {"step": 6})
    assert [p.name for p in store.states()] == ["checkpoint-6"], (
        "older states go once a newer one is complete"
    )


def test_published_checkpoints_are_copies_of_the_exports_and_come_back_after_deletion(tmp_path):
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    state = _state(store, 2)
    store.export(state, 1, {"step": 2})
    assert not (store.exports_dir / "ckpt-01" / "optimizer.pt").exists(), "optimizer state stays out"
    store.publish(1)
    published = store.checkpoints / "ckpt-01"
    assert json.loads((published / SIDECAR).read_text()) == {
        "step": 2,
        FILES: {"model.safetensors": {"sha256": hashlib.sha256(bytes([2]) * 8).hexdigest(), "bytes": 8}},
    }
    exported = store.exports_dir / "ckpt-01" / "model.safetensors"
    # a damaged published file (a read-only link would be no guard to root)
    os.truncate(published / "model.safetensors", 3)
    assert exported.read_bytes() == bytes([2]) * 8, "the trainer's copy is not the published file"
    assert store.republish_missing([1, 2]) == [1], "a published file of another size is published again"
    (published / SIDECAR).unlink()  # what Snakemake does to a failed job's outputs
    assert store.republish_missing([1, 2]) == [1]
    assert (published / "model.safetensors").read_bytes() == bytes([2]) * 8
    assert store.republish_missing([1, 2]) == []


def test_an_export_links_the_state_s_files_and_outlives_the_state(tmp_path, monkeypatch):
    """The export writes no second copy of the weights: its files are the state's (one inode, two
    names, subfolders included), so removing the state once a newer one is complete leaves the
    export whole. Where the file system refuses a hard link, the export is a copy."""
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    state = _state(store, 2, complete=False)
    (state / "1_Pooling").mkdir()
    (state / "1_Pooling" / "config.json").write_text("{}")
    store.export(state, 1, {"step": 2})
    exported = store.exports_dir / "ckpt-01"
    for name in ("model.safetensors", "1_Pooling/config.json"):
        assert (exported / name).stat().st_ino == (state / name).stat().st_ino, name
    store.complete_state(state, {"step": 2})
    store.complete_state(_state(store, 4, complete=False), {"step": 4})
    assert not state.exists() and (exported / "model.safetensors").read_bytes() == bytes([2]) * 8
    assert json.loads((exported / SIDECAR).read_text())[FILES] == file_records(exported)

    def no_links(source, target):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    later = _state(store, 6, complete=False)
    store.export(later, 2, {"step": 6})
    copied = store.exports_dir / "ckpt-02" / "model.safetensors"
    assert copied.read_bytes() == bytes([6]) * 8
    assert copied.stat().st_ino != (later / "model.safetensors").stat().st_ino


def test_an_export_records_its_files_from_the_state_s_records_hashed_once(tmp_path):
    """The trainer hashes a state's files once: the export's sidecar takes its model files' records
    (the same as hashing the copies), the state's progress all of them."""
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    state = _state(store, 2, complete=False)
    (state / "tokenizer").mkdir()
    (state / "tokenizer" / "vocab.txt").write_text("a b c")
    records = file_records(state)
    assert set(records) == {"model.safetensors", "optimizer.pt", "tokenizer/vocab.txt"}
    store.export(state, 1, {"step": 2}, records)
    exported = store.exports_dir / "ckpt-01"
    assert json.loads((exported / SIDECAR).read_text())[FILES] == file_records(exported)
    assert set(file_records(exported)) == {"model.safetensors", "tokenizer/vocab.txt"}
    store.complete_state(state, {"step": 2}, records)
    assert json.loads((state / PROGRESS).read_text())[FILES] == file_records(state) == records


def test_a_damaged_checkpoint_is_an_error_naming_the_file_and_the_repair(tmp_path):
    store = RunStore(tmp_path / "work", tmp_path / "ckpts" / "run")
    store.prepare({"run": "a"})
    store.export(_state(store, 2), 1, {"step": 2})
    store.publish(1)
    published = store.checkpoints / "ckpt-01"
    sidecar = json.loads((published / SIDECAR).read_text())
    verify_published(published, sidecar)
    check_published(tmp_path / "ckpts", ["run"])
    (published / "model.safetensors").write_bytes(bytes([9]) * 8)  # same size, other bytes
    check_published(tmp_path / "ckpts", ["run"])  # sizes only, at parse time
    with pytest.raises(CheckpointDamaged) as damaged:
        verify_published(published, sidecar)
    assert f"{published / 'model.safetensors'}: its SHA-256 is not the one recorded" in str(damaged.value)
    assert f"rm {published / SIDECAR} and run snakemake again" in str(damaged.value)
    os.truncate(published / "model.safetensors", 3)
    with pytest.raises(CheckpointDamaged, match="3 bytes where 8 are recorded"):
        check_published(tmp_path / "ckpts", ["run", "not-trained-yet"])
    (published / SIDECAR).unlink()  # the repair's first half: then Snakemake re-runs the training job
    check_published(tmp_path / "ckpts", ["run"])


def test_a_resume_drops_what_fails_its_records_and_what_follows_it(tmp_path):
    """Exports 1-3 at steps 2, 4, 6 and the latest state (step 6). A damaged export drops itself,
    the later exports and the states from its step: the run resumes from the last verified state
    (here none is left: from the start, since only the latest state is kept). A damaged state alone
    drops that state, and the exports stay."""
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    for index, step in enumerate((2, 4, 6), 1):
        state = _state(store, step, complete=False)
        store.export(state, index, {"step": step})
        store.complete_state(state, {"step": step})
    store.discard_damaged()
    assert store.latest_state().name == "checkpoint-6", "nothing damaged: nothing dropped"
    (store.trainer_dir / "checkpoint-6" / "optimizer.pt").write_bytes(b"ADAM")
    store.discard_damaged()
    assert store.latest_state() is None
    assert sorted(p.name for p in store.exports_dir.iterdir()) == ["ckpt-01", "ckpt-02", "ckpt-03"]
    state = _state(store, 6, complete=False)
    store.complete_state(state, {"step": 6})
    os.truncate(store.exports_dir / "ckpt-02" / "model.safetensors", 1)
    store.discard_damaged()
    assert sorted(p.name for p in store.exports_dir.iterdir()) == ["ckpt-01"]
    assert store.latest_state() is None


def test_state_of_other_settings_or_an_unknown_layout_is_discarded(tmp_path):
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a", "lr": 1})
    _state(store, 2)
    store.prepare({"run": "a", "lr": 1})
    assert store.latest_state() is not None, "same settings: resume"
    store.prepare({"run": "a", "lr": 2})
    assert store.latest_state() is None, "other settings: start afresh"
    _state(store, 2)
    (store.work / "fingerprint.json").unlink()
    store.prepare({"run": "a", "lr": 2})
    assert store.latest_state() is None, "no fingerprint: state of an older layout, not resumed"


def test_a_file_identical_to_the_previous_published_one_is_linked_once_it_passes_its_record(tmp_path):
    """Publishing links a file recorded as the previous published checkpoint's same file (frozen
    weights), but copies it when that file fails its record, and never links into the exports."""
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    for index, step in ((1, 2), (2, 4), (3, 6)):
        state = _state(store, step)
        (state / "frozen.safetensors").write_bytes(b"embeddings")
        store.export(state, index, {"step": step})
    store.publish(1)
    store.publish(2)
    first, second = (store.checkpoints / f"ckpt-0{k}" for k in (1, 2))
    inode = (first / "frozen.safetensors").stat().st_ino
    assert (second / "frozen.safetensors").stat().st_ino == inode
    assert (second / "model.safetensors").stat().st_ino != (first / "model.safetensors").stat().st_ino
    exported = {(store.exports_dir / f"ckpt-0{k}" / "frozen.safetensors").stat().st_ino for k in (1, 2)}
    assert inode not in exported, "a published file damaged in place must not damage an export"
    (second / "frozen.safetensors").write_bytes(b"embeddingZ")  # same size, other bytes: both damaged
    store.publish(3)
    third = store.checkpoints / "ckpt-03"
    assert (third / "frozen.safetensors").stat().st_ino != inode
    assert (third / "frozen.safetensors").read_bytes() == b"embeddings"
    verify_published(third, json.loads((third / SIDECAR).read_text()))
    # truncated, the shared file damages both checkpoints: the parse-time check names each of them
    # and one repair for both (one at a time, the second would stop the re-run that repairs them)
    os.truncate(second / "frozen.safetensors", 3)
    with pytest.raises(CheckpointDamaged) as damaged:
        check_published(store.checkpoints.parent, [store.checkpoints.name])
    message = str(damaged.value)
    assert message.startswith("damaged checkpoints: ") and "ckpt-03" not in message.split(";")[-1]
    for checkpoint in (first, second):
        assert f"{checkpoint / 'frozen.safetensors'}: 3 bytes where 10 are recorded" in message
    assert f"rm {first / SIDECAR} {second / SIDECAR} and run snakemake again" in message
