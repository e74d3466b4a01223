"""Which torch device a job runs on: one rule for training, evaluation and planning."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: Where the NVIDIA kernel module states its version ("... Kernel Module  550.54.15 ...").
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")


def nvidia_driver() -> str:
    """The NVIDIA driver's version from the kernel module, or why it is not known."""
    try:
        text = DRIVER_VERSION_FILE.read_text()
    except OSError:
        return f"no NVIDIA driver loaded ({DRIVER_VERSION_FILE} missing)"
    found = re.search(r"Kernel Module(?: for \w+)?\s+([\d.]+)", text)
    return f"NVIDIA driver {found.group(1)}" if found else f"NVIDIA driver ({text.strip()[:80]})"


def cuda_build() -> str:
    """What torch was built for, e.g. 'torch 2.13.0+cu130 (torch.version.cuda 13.0)'."""
    import torch

    cuda = torch.version.cuda
    return f"torch {torch.__version__} (torch.version.cuda {cuda or 'None: a CPU-only build'})"


def no_gpu_message() -> str:
    """Why ``device: cuda`` found no GPU, with what to do: the torch build, the driver, the devices
    the job was given. A torch built for a newer CUDA than the driver supports sees no GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    given = f"CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "CUDA_VISIBLE_DEVICES unset"
    return (
        f"config 'device' is cuda but no GPU is visible to torch: {cuda_build()}, {nvidia_driver()}, "
        f"{given}. A torch built for a newer CUDA than the driver supports sees no GPU: install the "
        "wheel for your driver (docs/cluster.md, 'The CUDA build': TORCH_INDEX=https://download.pytorch.org/whl/"
        "cu126 scripts/install.sh); a job without a GPU: ask for one (cluster.gpu_partition); "
        "else use device: auto or cpu"
    )


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; ``cuda`` without a GPU is an error
    (:func:`no_gpu_message`)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(no_gpu_message())
    return device
