"""Fit the activation constants of planning/memory.py (``ACTIVATIONS``) to measured CPU peaks.

    python benchmarks/fit_activation_bytes.py --out benchmarks/results/activation_bytes.md

Each shape of :data:`FIT_SHAPES` trains two AdamW steps in a fresh process (``benchmarks/memory_probe.py``:
peak resident set after a warm-up, above the resident set before the model), at two batch sizes
(:data:`SEQUENCES`); the slope of the peak in the tokens is the activation bytes per token, free of
whatever the training state costs (its term is the same at both sizes). Per token the memory model
(planning/memory.py's docstring) is linear in its constants:

    no checkpointing:   L a h + L b i + e h
    checkpointing:      L c h + a' h + b' i + e h        (e from the first fit; c = 4, below)

With checkpointing each layer keeps only its input, the fp32 residual stream (c = 4 bytes per hidden
unit, under autocast too): fixed, since a free c trades off against a' on shapes this small. Each is
fitted by non-negative least squares on relative errors (every row divided by its
measurement, so small shapes count as much as large ones) and rounded up to half a byte. The
shapes of tests/planning/test_memory.py's check are not among those fitted.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import memory_probe  # the probe and how it is run: one owner
import numpy as np
from benchmark_output import emit
from scipy.optimize import nnls

from rerank_scaling.precision import cpu_name

REPO = Path(__file__).resolve().parents[1]

#: (hidden, FFN width, layers): widths and depths apart, so a, b and e are told apart.
FIT_SHAPES = ((128, 256, 2), (128, 512, 6), (256, 384, 4), (256, 768, 2), (384, 512, 3), (384, 1152, 5))
#: Two batch sizes, in sequences of MAX_LENGTH tokens: the peak's slope between them is per token.
SEQUENCES, MAX_LENGTH, VOCAB = (16, 64), 128, 2000
#: Bytes per hidden unit a checkpointed layer keeps: its fp32 input.
CHECKPOINT_H = 4.0


def measure(
    hidden: int, intermediate: int, layers: int, sequences: int, precision: str, checkpointing: bool
) -> dict:
    shape = {
        "hidden": hidden,
        "intermediate": intermediate,
        "layers": layers,
        "vocab": VOCAB,
        "sequences": sequences,
        "max_length": MAX_LENGTH,
        "precision": precision,
        "checkpointing": checkpointing,
    }
    return memory_probe.measure(shape)


def per_token_activations(
    hidden: int, intermediate: int, layers: int, precision: str, checkpointing: bool
) -> float:
    """Measured bytes per token: the slope of the peak between the two batch sizes."""
    small, large = (
        measure(hidden, intermediate, layers, sequences, precision, checkpointing)["peak_bytes"]
        for sequences in SEQUENCES
    )
    return (large - small) / ((SEQUENCES[1] - SEQUENCES[0]) * MAX_LENGTH)


def fit_relative(design: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Non-negative least squares of ``design @ x ~ observed`` on relative errors."""
    solution, _ = nnls(design / observed[:, None], np.ones_like(observed))
    return solution


def round_up(value: float) -> float:
    return math.ceil(value * 2) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the Markdown report here too")
    args = parser.parse_args()
    lines = [
        "# Activation bytes per token, fitted to measured CPU peaks",
        "",
        f"CPU: {cpu_name()}; `python benchmarks/fit_activation_bytes.py`; slopes between {SEQUENCES[0]} "
        f"and {SEQUENCES[1]} sequences of {MAX_LENGTH} tokens, ModernBERT with SDPA, two AdamW steps "
        "(benchmarks/memory_probe.py).",
        "",
        "| precision | fit | constants (bytes per token) | worst relative error over the fitted shapes |",
        "|---|---|---|---|",
    ]
    for precision in ("half", "fp32"):
        plain = np.array([per_token_activations(h, i, L, precision, False) for h, i, L in FIT_SHAPES])
        design = np.array([[L * h, L * i, h] for h, i, L in FIT_SHAPES], dtype=float)
        a, b, e = (round_up(x) for x in fit_relative(design, plain))
        worst = np.max(np.abs(design @ [a, b, e] / plain - 1))
        lines.append(f"| {precision} | L(a h + b i) + e h | a = {a}, b = {b}, e = {e} | {worst:.1%} |")
        checkpointed = np.array([per_token_activations(h, i, L, precision, True) for h, i, L in FIT_SHAPES])
        known = np.array([e * h + CHECKPOINT_H * L * h for h, _, L in FIT_SHAPES])
        design = np.array([[h, i] for h, i, L in FIT_SHAPES], dtype=float)
        c, (a2, b2) = CHECKPOINT_H, (round_up(x) for x in fit_relative(design, checkpointed - known))
        worst = np.max(np.abs((design @ [a2, b2] + known) / checkpointed - 1))
        lines.append(
            f"| {precision} | L c h + a' h + b' i + e h | c = {c}, a' = {a2}, b' = {b2} | {worst:.1%} |"
        )
        print(lines[-2], lines[-1], sep="\n", flush=True)
        print(precision, "measured per token:", np.round(plain), np.round(checkpointed), flush=True)
    lines += ["", "planning/memory.py's `ACTIVATIONS` holds them: ActivationBytes(a, b, e, c, a', b')."]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
