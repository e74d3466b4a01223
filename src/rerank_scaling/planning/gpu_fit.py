"""The GPU a job got, against the one the workflow planned for (``gpu_memory_gb``,
``planning.gpu_name``; ``cluster.gpu_constraint`` asks SLURM for it, but a partition may mix cards).

The workflow passes the planned card to its jobs in :data:`PLANNED_GPU_ENV`. At start-up a
training job reads its device (``torch.cuda.get_device_properties``) and
:func:`fit_plan` decides: the workflow's memory plan (:mod:`rerank_scaling.planning.memory`) kept
when it fits this card's memory; re-planned for this card (more micro-batches or gradient
checkpointing: the same effective batch, so the same training up to rounding) when it does not;
stopped, naming the GPU, its memory and the fix, when nothing fits. An evaluation job logs the card
(:func:`gpu_report`): its batches are not planned, and its time limit assumes the planned card.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rerank_scaling.planning.memory import GB, MemoryPlan, MemoryRefused, usable_bytes

log = logging.getLogger(__name__)

#: How the workflow tells its jobs which GPU it planned for: set in the Snakemake process at parse
#: time (rules/common.smk), inherited by local jobs and by SLURM's (sbatch --export=ALL); neither a
#: param nor the shell command, so that changing the planned card re-runs no finished job.
PLANNED_GPU_ENV = "RERANK_SCALING_PLANNED_GPU"


@dataclass(frozen=True)
class GpuCard:
    """What a job's GPU is: its name and total memory, as ``torch.cuda.get_device_properties`` says."""

    name: str
    total_memory: int  # bytes

    @property
    def memory_gb(self) -> float:
        return self.total_memory / GB

    @classmethod
    def of_device(cls, index: int | None = None) -> GpuCard:
        """The job's current CUDA device (needs a GPU)."""
        import torch

        properties = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
        return cls(properties.name, int(properties.total_memory))


class GpuTooSmall(RuntimeError):
    """Nothing fits the run on the GPU the job got; the message names the card, its memory and the fix."""


def _at_least_as_lean(plan: MemoryPlan, other: MemoryPlan) -> bool:
    """Whether ``plan`` needs no more memory than ``other``: at least its micro-batches and its
    gradient checkpointing (a step's peak falls with both; planning.memory.training_peak)."""
    return (
        plan.micro_batches >= other.micro_batches
        and plan.gradient_checkpointing >= other.gradient_checkpointing
    )


def _how(plan: MemoryPlan) -> str:
    batches = f"{plan.micro_batches} micro-batch{'es' if plan.micro_batches > 1 else ''}"
    return batches + (" with gradient checkpointing" if plan.gradient_checkpointing else "")


def fit_plan(
    plan: MemoryPlan,
    card: GpuCard,
    planned_gb: float,
    replan: Callable[[float], MemoryPlan],
    what: str = "the run",
) -> MemoryPlan:
    """``plan`` (made for a ``planned_gb`` GB GPU) on ``card``: kept when the card has at least
    ``planned_gb`` or when ``plan`` is as lean as what ``replan(card's GB)`` picks for the card;
    else the card's plan (logged); :class:`GpuTooSmall` when ``replan`` refuses the card."""
    if card.memory_gb >= planned_gb:
        return plan
    try:
        fitted = replan(card.memory_gb)
    except MemoryRefused as refused:
        raise GpuTooSmall(
            f"{what}: the job got a {card.name} with {card.memory_gb:.1f} GB, and the run does not fit "
            f"it ({usable_bytes(card.memory_gb) / GB:.1f} GB usable): {refused}. The workflow planned for "
            f"a {planned_gb:g} GB GPU (gpu_memory_gb): set cluster.gpu_constraint to the SLURM feature of "
            f"cards with at least {planned_gb:g} GB (sinfo -o '%N %f %G' lists them), or "
            "cluster.gpu_partition to a partition of such cards"
        ) from refused
    if _at_least_as_lean(plan, fitted):
        return plan
    log.warning(
        "%s: the job got a %s with %.1f GB, less than the %g GB planned (gpu_memory_gb): training in %s "
        "instead of %s (the same effective batch); its time limit assumed the planned GPU. To get the "
        "planned card, set cluster.gpu_constraint",
        what,
        card.name,
        card.memory_gb,
        planned_gb,
        _how(fitted),
        _how(plan),
    )
    return fitted


def gpu_report(card: GpuCard, planned_gb: float, planned_name: str | None) -> str:
    """A line for a job's log: the card it got against the planned one."""
    planned = f"{planned_name} " if planned_name else ""
    same = card.memory_gb >= planned_gb and (
        not planned_name or card.name in planned_name or planned_name in card.name
    )
    verdict = "as planned" if same else "not the planned card: time limits assumed the planned one"
    return f"GPU: {card.name}, {card.memory_gb:.1f} GB; planned {planned}{planned_gb:g} GB ({verdict})"


def planned_gpu_json(gpu_memory_gb: float | None, gpu_name: str | None) -> str:
    """The value of :data:`PLANNED_GPU_ENV` for a config's ``gpu_memory_gb`` and ``planning.gpu_name``."""
    return json.dumps({"memory_gb": gpu_memory_gb, "name": gpu_name}, sort_keys=True)


def planned_gpu() -> tuple[float | None, str | None]:
    """(GB, name) of the GPU the workflow planned for, from :data:`PLANNED_GPU_ENV` ((None, None):
    not set, e.g. a job run by hand)."""
    text = os.environ.get(PLANNED_GPU_ENV)
    if not text:
        return None, None
    planned = json.loads(text)
    return planned.get("memory_gb"), planned.get("name")


def checked_plan(
    plan: MemoryPlan, device: str, replan: Callable[..., MemoryPlan], replan_args: tuple[Any, ...]
) -> MemoryPlan:
    """The trainer's start-up check: :func:`fit_plan` on the job's CUDA device against the planned
    GPU (:func:`planned_gpu`), re-planning by ``replan(memory, *replan_args)`` (the trainer's own
    ``run_memory_plan``, its last argument the run's id); ``plan`` unchanged on another device or
    without a planned GPU."""
    planned_gb, planned_name = planned_gpu()
    if device != "cuda" or not planned_gb:
        return plan
    card = GpuCard.of_device()
    log.info("%s", gpu_report(card, planned_gb, planned_name))
    return fit_plan(
        plan,
        card,
        planned_gb,
        lambda gb: replan({"micro_batches": 0, "gpu_memory_gb": gb}, *replan_args),
        str(replan_args[-1]),
    )


def report_gpu(device: str) -> None:
    """An evaluation job's start-up line: the GPU it got against the planned one (on CUDA only)."""
    planned_gb, planned_name = planned_gpu()
    if device == "cuda" and planned_gb:
        log.warning("%s", gpu_report(GpuCard.of_device(), planned_gb, planned_name))
