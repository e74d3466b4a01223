"""Where along the epoch checkpoints are kept."""

from __future__ import annotations

import math

import numpy as np


def checkpoint_steps(total_steps: int, count: int, spacing: str = "geometric") -> list[int]:
    """``count`` strictly increasing optimizer steps ending at ``total_steps``.

    ``uniform``: evenly spaced. ``geometric``: evenly spaced in log(step) from about
    ``total_steps / 50``, which resolves the fast early change that power laws in S describe.
    Fewer steps than ``count`` are returned only when ``total_steps < count``.
    """
    if total_steps < 1:
        raise ValueError("training has no steps: check the number of examples and the batch size")
    count = min(count, total_steps)
    if spacing == "uniform":
        raw = np.linspace(total_steps / count, total_steps, count)
    elif spacing == "geometric":
        first = max(1.0, total_steps / 50)
        raw = np.geomspace(first, total_steps, count)
    else:
        raise ValueError(f"training.checkpoint_spacing: unknown spacing {spacing!r}")
    steps: list[int] = []
    for value in raw:
        step = max(int(math.floor(value + 0.5)), steps[-1] + 1 if steps else 1)
        steps.append(step)
    # Bumping duplicates upwards may overshoot the end: pull the tail back below total_steps.
    steps[-1] = total_steps
    for i in range(len(steps) - 2, -1, -1):
        steps[i] = min(steps[i], steps[i + 1] - 1)
    return steps
