"""Measure the peak memory of two ModernBERT training steps on CPU, in a fresh process.

    python benchmarks/memory_probe.py '{"hidden": 256, "intermediate": 384, "layers": 4, "vocab": 1000,
        "sequences": 32, "max_length": 128, "precision": "half", "checkpointing": false}'

Prints {"peak_bytes": ..., "params": ...}. Method: peak resident set (``VmHWM``) minus the
resident set before the model is built, both taken after a warm-up: the same two steps on a tiny
model first touch the code pages and kernel caches of the ops (oneDNN/MKL JIT kernels, thread pools),
which take tens of MB of RSS that differs between CPUs (an AMX Xeon measured 40-50 MB above the AMD
Zen 4 the constants were fitted on); then ``/proc/self/clear_refs`` resets the high-water mark, so the
peak counts only what the model's training keeps. tracemalloc does not see torch's allocations, and torch
keeps no CPU allocator statistics; RSS does see them, provided freed tensors go back to the OS at
once: the caller sets ``MALLOC_MMAP_THRESHOLD_`` (glibc), which puts every block above it in its own
mmap (released on free) and turns off glibc's growing threshold that would otherwise keep freed
activations on the heap and inflate the peak. One thread: no per-thread arenas. Two steps: the
second has AdamW's moments allocated, as every later step does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def high_water_bytes() -> int:
    """Peak resident set of this process's own address space (``VmHWM``). Not ``ru_maxrss``: at
    exec Linux folds the old address space's high-water mark into it, so a probe started from a
    large parent (pytest after tests that loaded models) reports at least the parent's size."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    raise RuntimeError("/proc/self/status has no VmHWM")


def measure(shape: dict) -> dict:
    """Run this probe on ``shape`` in a fresh process (glibc's mmap threshold set, one thread) and
    return its {"peak_bytes", "params"}: what tests/planning/test_memory.py and
    benchmarks/fit_activation_bytes.py both call."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, __file__, json.dumps(shape)], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise RuntimeError(f"memory probe failed on {shape}: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def reset_high_water() -> None:
    """Set ``VmHWM`` to the current resident set (``echo 5 > /proc/PID/clear_refs``, Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def train_two_steps(shape: dict) -> int:
    """Two AdamW steps of a ModernBERT classifier of ``shape``; returns its parameter count."""
    import torch
    from transformers import ModernBertConfig, ModernBertForSequenceClassification

    ids = torch.randint(5, shape["vocab"], (shape["sequences"], shape["max_length"]))
    mask = torch.ones_like(ids)
    labels = torch.rand(shape["sequences"])
    config = ModernBertConfig(
        vocab_size=shape["vocab"],
        hidden_size=shape["hidden"],
        intermediate_size=shape["intermediate"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["hidden"] // 64,
        global_attn_every_n_layers=3,
        local_attention=128,
        max_position_embeddings=1024,
        num_labels=1,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
        attn_implementation="sdpa",
    )
    model = ModernBertForSequenceClassification(config)
    if shape["checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=shape["precision"] == "half"):
            logits = model(input_ids=ids, attention_mask=mask).logits.view(-1)
        torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    import gc

    import torch
    from transformers.utils import logging

    logging.set_verbosity_error()
    shape = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    warm_up = {**shape, "hidden": 64, "intermediate": 64, "layers": 3, "sequences": 2, "max_length": 32}
    train_two_steps(warm_up)
    gc.collect()
    reset_high_water()
    before = resident_bytes()
    params = train_two_steps(shape)
    print(json.dumps({"peak_bytes": high_water_bytes() - before, "params": params}))


if __name__ == "__main__":
    main()
