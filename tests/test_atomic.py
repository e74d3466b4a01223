"""Atomic writes: outputs follow the user's umask (a group can share a project directory), and an
interrupted write leaves the previous file or directory in place."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from rerank_scaling.atomic import atomic_directory, write_json, write_table, write_text


@pytest.fixture
def umask():
    """Set a umask for one test and restore the previous one."""
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    write_text(tmp_path / "a.txt", "x")
    write_json(tmp_path / "b.json", {"x": 1})
    write_table(pd.DataFrame({"x": [1]}), tmp_path / "c.parquet")
    with atomic_directory(tmp_path / "ckpt") as staging:
        (staging / "weights").write_bytes(b"w")
    assert [mode(tmp_path / n) for n in ("a.txt", "b.json", "c.parquet", "ckpt/weights")] == [expected] * 4
    assert mode(tmp_path / "ckpt") == expected | 0o111 & ~mask


def test_weights_a_library_writes_into_a_checkpoint_follow_the_umask(tmp_path, umask):
    """safetensors writes through a temporary file of mode 0600 (as mkstemp does) and copy2 keeps
    the mode: a checkpoint directory's weights still get the umask's mode; a file its writer made
    read-only stays read-only, an executable one executable."""
    import torch
    from safetensors.torch import save_file

    umask(0o022)
    save_file({"w": torch.zeros(2)}, tmp_path / "written.safetensors")
    assert mode(tmp_path / "written.safetensors") == 0o600, "safetensors no longer writes 0600"
    with atomic_directory(tmp_path / "ckpt") as staging:
        save_file({"w": torch.zeros(2)}, staging / "model.safetensors")
        (staging / "sub").mkdir(mode=0o700)
        (staging / "sub" / "frozen").write_text("x")
        os.chmod(staging / "sub" / "frozen", 0o400)
        (staging / "run.sh").write_text("#!/bin/sh\n")
        os.chmod(staging / "run.sh", 0o700)
    assert mode(tmp_path / "ckpt" / "model.safetensors") == 0o644
    assert [mode(tmp_path / "ckpt" / n) for n in ("sub", "sub/frozen", "run.sh")] == [0o755, 0o444, 0o755]


def test_an_interrupted_directory_write_keeps_the_previous_one(tmp_path):
    target = tmp_path / "ckpt-01"
    with atomic_directory(target) as staging:
        (staging / "weights").write_text("old")
    with pytest.raises(RuntimeError), atomic_directory(target) as staging:
        (staging / "weights").write_text("half")
        raise RuntimeError("killed")
    assert (target / "weights").read_text() == "old"
    with atomic_directory(target) as staging:  # the next write clears the leftover staging copy
        (staging / "weights").write_text("new")
    assert (target / "weights").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-01"]
