"""Training without waste: micro-batches equal one full batch, checkpointing changes no result,
length buckets keep every example once per epoch, tokens counted without a second tokenization."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY_TRAINING
from tiny_modernbert import save_tiny_modernbert

from rerank_scaling.settings import settings_from_dict
from rerank_scaling.training.batching import LengthBucketBatchSampler, bucketed_steps
from rerank_scaling.training.model_saves import checkpoint_tensors


def test_bucketed_steps_cover_every_row_once_with_less_padding():
    import random

    rng = random.Random(0)
    lengths = [min(int(rng.lognormvariate(5.5, 0.5)), 1280) for _ in range(5003)]
    steps = bucketed_steps(lengths, 32, seed=7)
    rows = [i for step in steps for i in step]
    assert sorted(rows) == list(range(len(lengths)))  # every row exactly once
    assert [len(s) for s in steps[:-1]] == [32] * (len(steps) - 1) and len(steps[-1]) == 5003 % 32
    assert bucketed_steps(lengths, 32, seed=7) == steps and bucketed_steps(lengths, 32, seed=8) != steps

    def padded(batches):  # tokens a batch padded to its longest row computes
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    shuffled = list(range(len(lengths)))
    rng.shuffle(shuffled)
    random_steps = [shuffled[i : i + 32] for i in range(0, len(shuffled), 32)]
    assert padded(steps) < 0.8 * padded(random_steps)
    assert padded(random_steps) > 1.5 * sum(lengths)


def test_micro_batches_are_slices_of_the_full_steps():
    lengths = list(range(200))
    full = LengthBucketBatchSampler(None, 8, False, seed=3, lengths=lengths, step_rows=8)
    micro = LengthBucketBatchSampler(None, 4, False, seed=3, lengths=lengths, step_rows=8)
    pairs = list(micro)
    assert [a + b for a, b in zip(pairs[::2], pairs[1::2], strict=True)] == list(full)
    assert len(micro) == len(pairs) == 50
    micro.set_epoch(1)
    assert list(micro) != pairs  # a new order every epoch


@pytest.fixture(scope="module")
def tiny_modernbert(tmp_path_factory) -> dict:
    path = save_tiny_modernbert(tmp_path_factory.mktemp("tiny") / "m", layers=2)
    return {"name": "tiny", "family": "hf", "path": str(path), "role": "fit"}


def trained(
    model: dict, objective: str, memory: dict, examples: dict, out: Path, bucketing: bool = True
) -> tuple[dict, dict]:
    """(final sidecar, final weights) of a 4-step run with this memory plan."""
    from rerank_scaling.training.trainer import TrainSettings, train_run

    settings = settings_from_dict(
        TrainSettings,
        # fp32: exact arithmetic, so micro-batches must give the full batch's step
        {**TINY_TRAINING, "max_steps": 4, "checkpoints": 2, "precision": "fp32"}
        | {"length_bucketing": bucketing},
        "training",
    )
    cars = train_run(
        model,
        objective,
        "full",
        13,
        settings,
        str(examples["pointwise"]),
        str(examples["groups"]),
        out / "ckpts",
        out / "work",
        device="cpu",
        memory=memory,
    )
    weights = checkpoint_tensors(out / "ckpts" / "ckpt-02")  # the frozen ones apart
    return cars[-1], weights


@pytest.mark.slow
@pytest.mark.parametrize("bucketing", [True, False])
@pytest.mark.parametrize("objective", ["pointwise", "listwise"])
def test_micro_batches_and_checkpointing_train_like_the_full_batch(
    objective, bucketing, tiny_modernbert, examples, tmp_path
):
    from safetensors.torch import load_file

    start = load_file(str(Path(tiny_modernbert["path"]) / "model.safetensors"))

    def run(plan: dict, where: str) -> tuple[dict, dict]:
        return trained(tiny_modernbert, objective, plan, examples, tmp_path / where, bucketing)

    full_car, full = run({"micro_batches": 1}, "b")
    micro_car, micro = run({"micro_batches": 2}, "c")
    ckpt_car, ckpt = run({"micro_batches": 2, "gradient_checkpointing": True}, "d")
    # The same rows per optimizer step: the same sequences and tokens counted.
    assert micro_car["examples"] == full_car["examples"] == ckpt_car["examples"]
    assert micro_car["tokens"] == full_car["tokens"] == ckpt_car["tokens"] > 0
    if objective == "pointwise":
        assert full_car["examples"] == 4 * TINY_TRAINING["pointwise_batch_size"]
    assert (micro_car["micro_batches"], ckpt_car["gradient_checkpointing"]) == (2, True)
    assert full_car["attn_implementation"] == "sdpa"  # no FlashAttention on CPU
    assert micro_car["loss"] == pytest.approx(full_car["loss"], rel=1e-4)
    lr, moved = TINY_TRAINING["lr"], 0
    for name, weight in full.items():
        if objective == "listwise" and name == "classifier.bias":
            # ListNet is invariant to shifting all scores: this gradient is 0 up to rounding, which
            # Adam's normalised update turns into a step of random sign.
            continue
        change = weight - start[name]
        moved += int(change.abs().max() > 0)
        for other in (micro, ckpt):
            # Adam moves each weight by up to lr per step; rounding may differ by 1% of one step. A
            # weight whose gradient is rounding noise (|g| ~ sqrt(eps)) gets Adam's normalised step of
            # either sign: at most 1 in 1000 may differ by more, and by at most 2 lr at each of the 4 steps.
            gap = ((other[name] - start[name]) - change).abs()
            off = gap > 0.01 * lr + 1e-3 * change.abs()
            assert int(off.sum()) <= max(1, off.numel() // 1000), (name, int(off.sum()), float(gap.max()))
            assert float(gap.max()) <= 4 * 2 * lr, (name, float(gap.max()))  # 4 steps of up to lr each way
    assert moved > len(full) // 2  # the comparison is about weights that trained


def test_a_job_plans_like_the_workflow_when_the_shape_was_unknown_at_parse_time():
    """micro_batches 0 (not prefetched when Snakemake parsed): the job plans from the loaded model."""
    from transformers import ModernBertConfig

    from rerank_scaling.training.trainer import TrainSettings, run_memory_plan

    config = ModernBertConfig(
        hidden_size=1792, num_hidden_layers=28, intermediate_size=3840, vocab_size=50368
    )
    section = {"lr": 2e-5, "max_length": 256, "checkpoints": 15, "pointwise_batch_size": 128}
    settings = settings_from_dict(TrainSettings, section, "training")
    unknown = {"gradient_checkpointing": False, "micro_batches": 0, "gpu_memory_gb": 80}
    plan = run_memory_plan(unknown, config, None, "pointwise", 128, settings, True, "ettin-1b__pointwise")
    assert (plan.micro_batches, plan.gradient_checkpointing) == (2, False)  # as config_memory_plans says
    given = run_memory_plan(
        {"gradient_checkpointing": True, "micro_batches": 4},
        config,
        None,
        "pointwise",
        128,
        settings,
        True,
        "r",
    )
    assert (given.micro_batches, given.gradient_checkpointing) == (4, True)
    with pytest.raises(ValueError, match="batch 128 cannot be cut into 3 micro-batches"):
        run_memory_plan({"micro_batches": 3}, config, None, "pointwise", 128, settings, True, "r")
