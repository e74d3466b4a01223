"""A run's optimizer steps: the ``training`` keys that set them (:class:`StepSettings`), the formula
(:func:`total_steps`) and the check that ``training.checkpoints`` fit in them
(:func:`training_steps_problems`). On the ground floor because three floors read them: the data
jobs (the examples and fraction checks, with the real row counts), the trainer and the workflow's
parse-time checks (with the rows the config bounds). Defaults: the schema's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol

from rerank_scaling.settings import Problems, SectionSettings, problem


class StepKeys(Protocol):
    """What :func:`total_steps` reads of a settings object (``StepSettings``, the trainer's
    ``TrainSettings``)."""

    max_steps: int | None
    epochs: float


@dataclass(frozen=True)
class StepSettings(SectionSettings):
    """The ``training`` keys that set how many optimizer steps a run has: the examples and fraction
    jobs check them against the examples they see (only these, so that other training changes do
    not re-run those jobs)."""

    SECTION: ClassVar[str] = "training"

    objectives: tuple[str, ...]
    checkpoints: int
    max_steps: int | None
    epochs: float
    pointwise_batch_size: int
    group_queries_per_batch: int

    def batch(self, objective: str) -> tuple[str, int]:
        """The batch key of ``objective`` and its value: pairs for pointwise, queries otherwise."""
        key = "pointwise_batch_size" if objective == "pointwise" else "group_queries_per_batch"
        return key, getattr(self, key)


def total_steps(settings: StepKeys, rows: int, batch: int, fraction: float) -> int:
    """Optimizer steps of a run, the length its warm-up and linear decay are scaled to: its epochs
    over its own rows; with ``training.max_steps``, that many times its data fraction (the same
    passes over the data as the full run), so every fraction ends its own complete schedule."""
    if settings.max_steps:
        return max(1, math.ceil(settings.max_steps * fraction - 1e-9))
    return max(1, math.ceil(math.ceil(rows / batch) * settings.epochs))


def training_steps_problems(training: StepSettings, rows: dict[str, int], exact: bool) -> Problems:
    """Every objective has at least ``training.checkpoints`` optimizer steps.

    ``rows``: objective -> training rows (pointwise pairs, or groups); ``exact`` False when they are
    an upper bound estimated from the config, so only a sure shortfall is reported.
    """
    wanted = training.checkpoints
    if training.max_steps is not None:
        if training.max_steps < wanted:
            return [
                problem(
                    "training.max_steps",
                    f"{training.max_steps} steps cannot hold training.checkpoints = {wanted} checkpoints; "
                    f"raise training.max_steps to at least {wanted} or lower training.checkpoints",
                )
            ]
        return []
    problems = []
    for objective in training.objectives:
        if objective not in rows:
            continue
        key, batch = training.batch(objective)
        steps = math.ceil(math.ceil(rows[objective] / batch) * training.epochs)
        if steps < wanted:
            bound = "at most " if not exact else ""
            problems.append(
                problem(
                    "training.checkpoints",
                    f"{objective} training has {bound}{steps} optimizer steps ({bound}{rows[objective]} "
                    f"rows / training.{key} {batch} x training.epochs), fewer than the {wanted} "
                    f"checkpoints asked for; lower training.checkpoints or training.{key}, raise "
                    "training.epochs, or set training.max_steps",
                )
            )
    return problems
