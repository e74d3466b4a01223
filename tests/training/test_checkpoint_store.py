"""The run store's invariants on real files (the kill tests in test_resume.py drive them end to end)."""

from __future__ import annotations

import json
import os

from rerank_scaling.training.checkpoint_store import PROGRESS, SIDECAR, RunStore


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


def test_published_checkpoints_are_links_to_the_exports_and_come_back_after_deletion(tmp_path):
    store = RunStore(tmp_path / "work", tmp_path / "ckpts")
    store.prepare({"run": "a"})
    state = _state(store, 2)
    store.export(state, 1, {"step": 2})
    assert not (store.exports_dir / "ckpt-01" / "optimizer.pt").exists(), "optimizer state stays out"
    store.publish(1)
    published = store.checkpoints / "ckpt-01"
    assert json.loads((published / SIDECAR).read_text()) == {"step": 2}
    exported = store.exports_dir / "ckpt-01" / "model.safetensors"
    assert os.stat(published / "model.safetensors").st_ino == os.stat(exported).st_ino
    (published / SIDECAR).unlink()  # what Snakemake does to a failed job's outputs
    assert store.republish_missing([1, 2]) == [1]
    assert (published / "model.safetensors").read_bytes() == bytes([2]) * 8


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
