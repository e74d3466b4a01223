"""What dropout costs a CPU training step, and how much of it is the random number generator.

    python benchmarks/bench_dropout_rng.py --out benchmarks/results/dropout_rng_amx.md

Per default size (config.yaml's models; ``training.pointwise_batch_size`` pairs of
``training.max_length`` tokens, one thread): the pipeline's training step
(``bench_cpu_peak.Steps``, mode "bf16 autocast": bf16 autocast, fused AdamW, as the trainer runs it)
with the models' dropout (0.1 on hidden states and on attention probabilities) against the same step
with every dropout at 0 -- the most a faster dropout could save. Then, on one step's tensor shapes,
the parts: ``torch.nn.functional.scaled_dot_product_attention`` with ``dropout_p`` 0.1 against 0
(with dropout, PyTorch's CPU attention takes its unfused math path and draws a mask over every
attention probability), and the mask alone: ``Tensor.bernoulli_`` (what ``nn.Dropout`` draws)
against a candidate that draws 16 random bits per element from NumPy's PCG64 seeded by one draw of
torch's generator (keep where the bits >= round(p 2^16): keep probability 1 - 6554/65536 at p = 0.1,
0.99999 of 0.9). Interleaved repeats, medians (min-max); the CPU and load as in the other reports.
Nothing here changes training: it measures what a change would buy.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import yaml
from bench_cpu_peak import Steps
from benchmark_output import emit
from interleaved import interleaved_times, span

from rerank_scaling.compute.cpu_profiles import cpu_kind, eval_batch_size
from rerank_scaling.precision import cpu_name
from rerank_scaling.settings import settings_from_dict
from rerank_scaling.training.train_settings import GRID_KEYS, TrainSettings

CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"
TRAIN_MODE = "bf16 autocast"
P = 0.1


def pcg64_keep(shape: tuple[int, ...], p: float) -> torch.Tensor:
    """A keep-mask from 16 random bits per element of PCG64, seeded by one draw of torch's generator."""
    seed = int(torch.randint(0, 2**62, (1,)).item())
    bits = np.random.default_rng(seed).integers(0, 2**16, int(np.prod(shape)), dtype=np.uint16)
    return torch.from_numpy(bits >= round(p * 2**16)).view(shape)


#: Step variants: (attention implementation, dropout); the first is the pipeline's.
VARIANTS = (("sdpa", P), ("eager", P), ("sdpa", 0.0), ("eager", 0.0))


def add_variant(steps: Steps, attention: str, dropout: float) -> str:
    """A copy of the "bf16 autocast" model and optimizer with ``attention`` (transformers' name: the
    layers look it up in the config at every forward) and every dropout at ``dropout`` (BERT's
    attention reads its probability from its ``dropout`` module's ``p``); returns the mode's name."""
    name = f"{attention}, dropout {dropout:g}"
    trained = copy.deepcopy(steps.train_models[TRAIN_MODE])
    trained.model.config._attn_implementation = attention
    for module in trained.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = dropout
    steps.train_models[name] = trained
    params = [p for p in trained.parameters() if p.requires_grad]
    steps.optimizers[name] = torch.optim.AdamW(params, lr=1e-5, fused=True)
    return name


def attention_step(dropout: float, fused: bool, q, k, v, mask) -> Callable[[], None]:
    """One attention forward and backward: PyTorch's SDPA (``fused``) or the unfused product,
    softmax, dropout and product (transformers' "eager")."""

    def run() -> None:
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        query, key, value = leaves
        if fused:
            out = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=mask, dropout_p=dropout
            )
        else:
            weights = (query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5 + mask).softmax(-1)
            out = torch.nn.functional.dropout(weights, dropout, True) @ value
        out.float().sum().backward()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="+", default=["L1", "L4", "L6"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    config = yaml.safe_load(CONFIG.read_text())
    training = {k: v for k, v in config["training"].items() if k not in GRID_KEYS}
    torch.set_num_threads(settings_from_dict(TrainSettings, training).threads)
    torch.manual_seed(0)
    batch, max_length = config["training"]["pointwise_batch_size"], config["training"]["max_length"]
    specs = [m for m in config["models"] if m["name"] in args.sizes]
    step_cells = {}
    for spec in specs:
        steps = Steps(spec, max_length, eval_batch_size(config["evaluation"]["batch_size"], "cpu"), batch)
        for attention, dropout in VARIANTS:
            step_cells[(spec["name"], attention, dropout)] = steps.train(
                add_variant(steps, attention, dropout)
            )
    config_hf = steps.fp32.model.config
    heads, hidden, length = config_hf.num_attention_heads, config_hf.hidden_size, steps.seq_len
    q, k, v = (torch.randn(batch, heads, length, hidden // heads).bfloat16() for _ in range(3))
    mask = torch.zeros(batch, 1, length, length, dtype=torch.bfloat16)
    attention = (batch, heads, length, length)
    states = torch.randn(batch, length, hidden).bfloat16()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    part_cells = {
        "attention forward, SDPA, dropout 0.1": lambda: sdpa(q, k, v, attn_mask=mask, dropout_p=P),
        "attention forward, SDPA, dropout 0": lambda: sdpa(q, k, v, attn_mask=mask),
        "attention forward and backward, SDPA, dropout 0.1": attention_step(P, True, q, k, v, mask),
        "attention forward and backward, SDPA, dropout 0": attention_step(0.0, True, q, k, v, mask),
        "attention forward and backward, eager, dropout 0.1": attention_step(P, False, q, k, v, mask),
        "attention forward and backward, eager, dropout 0": attention_step(0.0, False, q, k, v, mask),
        "attention-probability mask, bernoulli_": lambda: torch.empty(attention).bernoulli_(1 - P),
        "attention-probability mask, PCG64 bits": lambda: pcg64_keep(attention, P),
        "hidden-state mask, bernoulli_": lambda: torch.empty(states.shape).bernoulli_(1 - P),
        "hidden-state mask, PCG64 bits": lambda: pcg64_keep(tuple(states.shape), P),
        "hidden-state dropout (nn.functional.dropout)": lambda: torch.nn.functional.dropout(states, P, True),
    }
    step_seconds = interleaved_times(step_cells, args.repeats, inner=3, shuffle=0)
    part_seconds = interleaved_times(part_cells, args.repeats, inner=20, shuffle=0)
    lines = [
        "# Dropout in a CPU training step",
        "",
        f"`python benchmarks/bench_dropout_rng.py` on {cpu_name()} (kind `{cpu_kind()}`), {os.cpu_count()} "
        f"CPUs, {torch.get_num_threads()} thread, torch {torch.__version__}; {batch} pairs x {length} tokens "
        f"(training.pointwise_batch_size, training.max_length), dropout {P:g}; {args.repeats} interleaved "
        f"repeats; load average at the end {os.getloadavg()[0]:.2f}. Milliseconds: median (min-max).",
        "",
        "## The pipeline's training step, its attention and dropout varied",
        "",
        "Attention: `sdpa` (the pipeline's: PyTorch's scaled_dot_product_attention) or `eager` "
        "(transformers' unfused product, softmax, dropout, product); dropout on hidden states and "
        "attention probabilities. Ratio: the variant's median over the pipeline's.",
        "",
        "| size | "
        + " | ".join(f"{a}, dropout {d:g} ms" for a, d in VARIANTS)
        + " | "
        + " | ".join(f"{a}, dropout {d:g} / pipeline" for a, d in VARIANTS[1:])
        + " |",
        "|---|" + "---|" * len(VARIANTS) + "---:|" * (len(VARIANTS) - 1),
    ]
    for spec in specs:
        cells = [step_seconds[(spec["name"], a, d)] for a, d in VARIANTS]
        base = statistics.median(cells[0])
        ratios = [f"{statistics.median(c) / base:.2f}" for c in cells[1:]]
        lines.append(
            f"| {spec['name']} | " + " | ".join(span(c) for c in cells) + " | " + " | ".join(ratios) + " |"
        )
    lines += [
        "",
        f"## Its parts, on one step's shapes (attention [{batch}, {heads}, {length}, {length}], hidden "
        f"states [{batch}, {length}, {hidden}], bf16)",
        "",
        "| call | ms | ns per element |",
        "|---|---|---:|",
    ]
    elements = {"attention": int(np.prod(attention)), "hidden": int(np.prod(states.shape))}
    for name, values in part_seconds.items():
        count = elements["attention" if "attention" in name.split(",")[0] else "hidden"]
        lines.append(f"| {name} | {span(values)} | {statistics.median(values) * 1e9 / count:.1f} |")
    lines.append("")
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
