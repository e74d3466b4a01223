"""The config's ``training`` section as settings, and a run's step count: torch-free, so the workflow's
parse (job resources, config checks) reads them without importing the trainer's torch stack."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rerank_scaling.grid import OBJECTIVES


@dataclass(frozen=True)
class TrainSettings:
    """Config ``training`` (the grid keys are read by the workflow, not here)."""

    objectives: tuple[str, ...] = OBJECTIVES
    attention: tuple[str, ...] = ("full",)
    seeds: tuple[int, ...] = (13,)
    extra_seeds: Any = None
    data_fractions: tuple[float, ...] = (1.0,)  # grid keys: the run's own fraction and source come
    annotations: tuple[str, ...] = ("human",)  # with its id
    annotation_files: Any = None  # grid key: the generated-query sources' files (data.annotation_files)
    lr: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 256
    epochs: float = 1.0
    max_steps: int | None = None
    freeze_embeddings: bool = False
    gradient_checkpointing: str | bool = "auto"  # auto | true | false (planning.memory.plan_memory)
    length_bucketing: bool = False  # length-bucketed steps (.batching); changes what a step sees
    pointwise_batch_size: int = 128
    group_queries_per_batch: int = 16
    listnet_label_scale: float = 10.0
    checkpoints: int = 15
    checkpoint_spacing: str = "geometric"
    precision: str = "auto"  # auto | fp32 | bf16 (precision.resolve_precision)
    threads: int | None = None
    mem_mb: int | None = None
    runtime: int | None = None


def total_steps(settings: TrainSettings, rows: int, batch: int, fraction: float) -> int:
    """Optimizer steps of a run, the length its warm-up and linear decay are scaled to: its epochs
    over its own rows; with ``training.max_steps``, that many times its data fraction (the same
    passes over the data as the full run), so every fraction ends its own complete schedule."""
    if settings.max_steps:
        return max(1, math.ceil(settings.max_steps * fraction - 1e-9))
    return max(1, math.ceil(math.ceil(rows / batch) * settings.epochs))
