"""What a profiling run measures of its own process: wall time per step (the device synchronised),
and peak resident memory over a baseline (Linux ``/proc/self``: ``clear_refs`` resets the peak,
``VmHWM`` reads it), for :mod:`rerank_scaling.planning.measured_profiles`."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import re
import time
from collections.abc import Callable
from pathlib import Path


def peak_rss_reset() -> float:
    """Reset the kernel's peak-RSS mark (Linux clear_refs 5); return the current RSS in MB (NaN if not).

    Freed heap pages go back to the OS first (glibc ``malloc_trim``), else the next model would
    reuse still-resident pages and its growth over the baseline would read too low.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return proc_status_mb("VmRSS")
    except OSError:
        return float("nan")


def proc_status_mb(field_name: str) -> float:
    try:
        found = re.search(rf"^{field_name}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        return float("nan")
    return int(found.group(1)) / 1024 if found else float("nan")


def timed(step: Callable[[], None], repeats: int, device: str) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``step``, the device synchronised around each."""
    sync_device(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync_device(device)
        times.append(time.perf_counter() - start)
    return times


def sync_device(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
