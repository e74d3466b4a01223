"""Train one cross-encoder run (size x objective x attention x seed) with checkpoints across the epoch.

Objectives (sentence-transformers cross-encoder losses):

* ``pointwise``: ``BinaryCrossEntropyLoss`` on (q, d, label) pairs;
* ``pairwise``: ``RankNetLoss`` (Burges et al. 2005) on groups of 1 positive + n BM25 negatives;
* ``listwise``: ``ListNetLoss`` (Cao et al. 2007) on the same groups. ListNet's target is
  softmax(labels), so 0/1 labels give a soft target; labels are multiplied by
  ``listnet_label_scale`` to make the target nearly one-hot.

Checkpoints: at K steps (:func:`schedule.checkpoint_steps`) the model is exported to
``<checkpoints>/ckpt-XX/`` (safetensors, loadable by ``CrossEncoder(path)``) with a
``checkpoint.json`` sidecar written last (step, examples, tokens, FLOPs ~= 6*N*tokens, wall time,
loss). The trainer's own state (optimizer, scheduler, RNG) is kept only for the latest step, in
``<work>/trainer``; a killed job re-run with the same arguments resumes from it and ends with the
same checkpoint steps as an uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rerank_scaling.atomic import write_json
from rerank_scaling.models import ModelStats, build_cross_encoder, model_stats
from rerank_scaling.schedule import checkpoint_steps

log = logging.getLogger(__name__)

OBJECTIVES = ("pointwise", "pairwise", "listwise")
TRAINER_STATE_FILES = (
    "optimizer.pt",
    "scheduler.pt",
    "trainer_state.json",
    "training_args.bin",
    "rng_state.pth",
    "progress.json",
)


@dataclass(frozen=True)
class TrainSettings:
    """Config ``training`` (the grid keys are read by the workflow, not here)."""

    objectives: tuple[str, ...] = OBJECTIVES
    attention: tuple[str, ...] = ("full",)
    seeds: tuple[int, ...] = (13,)
    extra_seeds: Any = None
    lr: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 256
    epochs: float = 1.0
    max_steps: int | None = None
    freeze_embeddings: bool = False
    pointwise_batch_size: int = 128
    group_queries_per_batch: int = 16
    listnet_label_scale: float = 10.0
    checkpoints: int = 15
    checkpoint_spacing: str = "geometric"
    threads: int | None = None
    mem_mb: int | None = None
    runtime: int | None = None


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("config 'device' is cuda but no GPU is visible; use device: auto or cpu")
    return device


def load_examples(objective: str, pointwise: str, groups: str, label_scale: float) -> Any:
    """The training dataset of an objective as a ``datasets.Dataset`` in the loss's column order."""
    from datasets import Dataset

    if objective == "pointwise":
        frame = pd.read_parquet(pointwise)[["query", "document", "label"]]
    elif objective in ("pairwise", "listwise"):
        frame = pd.read_parquet(groups)[["query", "documents", "labels"]]
        if objective == "listwise":
            frame["labels"] = [[label * label_scale for label in labels] for labels in frame["labels"]]
    else:
        raise ValueError(f"training.objectives: unknown objective {objective!r}")
    if frame.empty:
        raise ValueError(f"no training examples for {objective}: check the examples settings")
    return Dataset.from_pandas(frame, preserve_index=False)


class TokenCountingLoss:
    """Wraps a sentence-transformers loss and counts the non-padding tokens it is fed."""

    def __new__(cls, loss: Any, tokenizer: Any, max_length: int) -> Any:
        import torch

        class _Counting(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = loss
                self.model = loss.model
                self.tokens = 0
                self.examples = 0

            def forward(self, inputs: list[Any], labels: Any) -> Any:
                queries, docs = inputs[0], inputs[1]
                pairs = (
                    [(q, d) for q, ds in zip(queries, docs, strict=True) for d in ds]
                    if docs and isinstance(docs[0], list)
                    else list(zip(queries, docs, strict=True))
                )
                lengths = tokenizer(pairs, truncation=True, max_length=max_length)["input_ids"]
                self.tokens += sum(len(ids) for ids in lengths)
                self.examples += len(pairs)
                return self.inner(inputs, labels)

        return _Counting()


def make_loss(objective: str, model: Any) -> Any:
    from sentence_transformers.cross_encoder import losses

    if objective == "pointwise":
        return losses.BinaryCrossEntropyLoss(model)
    if objective == "pairwise":
        return losses.RankNetLoss(model)
    return losses.ListNetLoss(model)


def _latest_trainer_checkpoint(trainer_dir: Path) -> Path | None:
    found = sorted(trainer_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return found[-1] if found else None


def export_checkpoint(source: Path, target: Path, sidecar: dict[str, Any]) -> None:
    """Copy model files (not optimizer state) to ``target`` atomically, then write the sidecar."""
    staging = target.with_name(f".{target.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(*TRAINER_STATE_FILES))
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    write_json(target / "checkpoint.json", sidecar)


def train_run(
    spec: dict[str, Any],
    objective: str,
    attention: str,
    seed: int,
    settings: TrainSettings,
    pointwise: str,
    groups: str,
    checkpoints_dir: str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    device: str = "auto",
    corpus_texts: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Train one run and export its checkpoints; returns their sidecars. Resumes if interrupted."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from transformers import TrainerCallback

    device = resolve_device(device)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    checkpoints_dir, work_dir = Path(checkpoints_dir), Path(work_dir)
    trainer_dir = work_dir / "trainer"
    trainer_dir.mkdir(parents=True, exist_ok=True)

    model = build_cross_encoder(spec, settings.max_length, seed, corpus_texts, work_dir)
    if attention != "full":
        from rerank_scaling.sparse_encoder import apply_window_attention, attention_variant_from_name

        apply_window_attention(model.model, attention_variant_from_name(attention))
    if settings.freeze_embeddings:
        model.model.get_input_embeddings().weight.requires_grad_(False)
    stats: ModelStats = model_stats(model.model)

    dataset = load_examples(objective, pointwise, groups, settings.listnet_label_scale)
    batch = settings.pointwise_batch_size if objective == "pointwise" else settings.group_queries_per_batch
    steps_per_epoch = math.ceil(len(dataset) / batch)
    total = settings.max_steps or max(1, math.ceil(steps_per_epoch * settings.epochs))
    save_at = checkpoint_steps(total, settings.checkpoints, settings.checkpoint_spacing)
    log.info(
        "%s %s %s s%d: %d rows, batch %d, %d steps, checkpoints at %s, %s",
        spec["name"],
        objective,
        attention,
        seed,
        len(dataset),
        batch,
        total,
        save_at,
        stats,
    )

    loss = TokenCountingLoss(make_loss(objective, model), model.tokenizer, settings.max_length)
    resume_from = _latest_trainer_checkpoint(trainer_dir)
    clock = {"start": time.perf_counter(), "offset": 0.0, "loss": float("nan")}
    if resume_from is not None:
        previous = json.loads((resume_from / "progress.json").read_text())
        loss.tokens, loss.examples, clock["offset"] = (
            previous["tokens"],
            previous["examples"],
            previous["wall_s"],
        )
        log.info("resuming from %s (step %d)", resume_from, previous["step"])

    sidecars: list[dict[str, Any]] = []

    class CheckpointCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            control.should_save = state.global_step in save_at
            return control

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and "loss" in logs:
                clock["loss"] = float(logs["loss"])

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step = state.global_step
            source = trainer_dir / f"checkpoint-{step}"
            progress = {
                "run": f"{spec['name']}__{objective}__{attention}__s{seed}",
                "model": spec["name"],
                "family": spec["family"],
                "role": spec["role"],
                "objective": objective,
                "attention": attention,
                "seed": seed,
                "checkpoint": save_at.index(step) + 1,
                "step": step,
                "total_steps": total,
                "examples": loss.examples,
                "tokens": loss.tokens,
                "flops": 6.0 * stats.non_embedding_params * loss.tokens,
                "wall_s": clock["offset"] + time.perf_counter() - clock["start"],
                "loss": clock["loss"],
                "device": device,
                **stats.as_dict(),
            }
            write_json(source / "progress.json", progress)
            export_checkpoint(source, checkpoints_dir / f"ckpt-{progress['checkpoint']:02d}", progress)
            sidecars.append(progress)
            log.info(
                "checkpoint %d/%d at step %d (loss %.4f)",
                progress["checkpoint"],
                len(save_at),
                step,
                clock["loss"],
            )

    use_bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    args = CrossEncoderTrainingArguments(
        output_dir=str(trainer_dir),
        num_train_epochs=settings.epochs,
        max_steps=total,
        per_device_train_batch_size=batch,
        learning_rate=settings.lr,
        warmup_ratio=settings.warmup_ratio,
        weight_decay=settings.weight_decay,
        seed=seed,
        data_seed=seed,
        save_strategy="steps",
        save_steps=10**9,
        save_total_limit=1,
        logging_steps=max(1, min(save_at[0], 10)),
        report_to="none",
        use_cpu=device == "cpu",
        bf16=use_bf16,
        dataloader_drop_last=False,
        disable_tqdm=False,
    )
    trainer = CrossEncoderTrainer(
        model=model, args=args, train_dataset=dataset, loss=loss, callbacks=[CheckpointCallback()]
    )
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    return sidecars
