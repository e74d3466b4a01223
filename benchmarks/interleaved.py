"""Shared by the benchmark scripts: time several calls in interleaved rounds, so that a change of
load during a run hits every call alike (the brief's "ratios in one run, interleaved repeats")."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Hashable


def call_seconds(fn: Callable[[], object], device: str = "cpu") -> float:
    """Seconds of one call of ``fn``; on CUDA by events around it, synchronised."""
    if device == "cuda":
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3
    begin = time.perf_counter()
    fn()
    return time.perf_counter() - begin


def interleaved_times(
    calls: dict[Hashable, Callable[[], object]],
    repeats: int,
    warmup: int = 1,
    inner: int = 1,
    device: str = "cpu",
    shuffle: int | None = None,
) -> dict[Hashable, list[float]]:
    """Seconds per call of each of ``calls`` over ``repeats`` rounds in which all take turns (each
    timed over ``inner`` calls), after ``warmup`` untimed rounds; with ``shuffle`` (a seed), each
    round's order is a new random one, so no call always follows the same neighbour."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    order = random.Random(shuffle)
    times: dict[Hashable, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        names = order.sample(list(calls), len(calls)) if shuffle is not None else list(calls)
        for name in names:
            times[name].append(sum(call_seconds(calls[name], device) for _ in range(inner)) / inner)
    return times


def span(values: list[float], scale: float = 1e3, digits: int = 2) -> str:
    """A cell of timings: the median (min-max) of ``values`` times ``scale`` (seconds -> ms by default)."""
    low, mid, high = (
        f"{value * scale:.{digits}f}" for value in (min(values), statistics.median(values), max(values))
    )
    return f"{mid} ({low}-{high})"
