"""Which torch device a job runs on: one rule for training, evaluation and planning."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; ``cuda`` without a GPU is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("config 'device' is cuda but no GPU is visible; use device: auto or cpu")
    return device
