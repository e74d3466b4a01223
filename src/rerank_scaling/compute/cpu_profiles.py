"""Measured per-CPU-kind settings: one table, keyed by the kind of CPU a job runs on, with a safe fallback.

What pays on one CPU costs on another: on a Xeon with AMX the bf16 GEMMs are so cheap that the
element-wise rest dominates, so a compiled graph (:mod:`rerank_scaling.compute.compiled_graphs`) pays back its
compile time sooner than on a CPU whose GEMMs dominate; the bf16 error that the near-tie rescoring
(:mod:`rerank_scaling.evaluation.near_ties`) must cover is a property of the kernels a CPU runs. Each
entry of :data:`PROFILES` names the benchmark file its numbers come from; a CPU of no measured kind
gets :data:`FALLBACK`, whose values are the conservative ones the pipeline used before any table
(the near-tie safety factor 3, no compiled graphs).
"""

from __future__ import annotations

from dataclasses import dataclass

from rerank_scaling.precision import cpu_bf16_units, cpu_family, cpu_vendor


@dataclass(frozen=True)
class CpuProfile:
    """What a CPU kind measured; ``source``: the benchmark results it comes from."""

    kind: str
    #: e = factor x the largest |bf16 - fp32| of the calibration sample (near_ties.error_bound): the
    #: worst ratio, over measured checkpoint-splits, of a split's largest error to its calibration
    #: sample's, rounded up with a margin
    near_tie_factor: float
    #: ``evaluation.compile: auto`` compiles a model's bf16 scoring when a job scores at least this
    #: many pairs with it (the compile's seconds / the seconds it saves a pair); None: never
    eval_compile_pairs: int | None
    #: ``training.compile: auto`` compiles a run's training step when the run has at least this many
    #: optimizer steps; None: never
    train_compile_steps: int | None
    source: str
    #: the fp32 scoring (``evaluation.precision`` fp32, and the fp32 rescoring of near ties) runs
    #: through the fused oneDNN encoder (:mod:`rerank_scaling.compute.fused_encoder`): measured faster
    #: than the eager fp32 forward on this kind (``bench_fused_encoder.py --dtype fp32``); False: eager
    fused_fp32: bool = False
    #: ``evaluation.batch_size: auto`` on this kind: the batch size with the best geometric mean of
    #: pairs/s over the default sizes (``bench_eval_batch.py``); 64 where that was the configured 64
    eval_batch_size: int = 64


#: The measured kinds. Xeon with AMX: bench_eval_precision.py found the largest error of a split at
#: most 2.65 x its calibration sample's over 36 checkpoint-splits (eval_precision_amx.md, eager),
#: then 3.54 x with the fused encoder's compiled attention and layer norm (eval_precision_amx.md at
#: 0d328e2: one kept pair's error 1.18 e at the factor 3), so the factor is 4;
#: bench_compile.py on a quiet machine (compile_amx.md, load 0.56-1.07, a cold inductor cache): the
#: compiled evaluation is 0.99x-1.22x eager over L1-L6 and never pays back at L6, the compiled
#: training step 0.73x-0.83x (slower at every size), so neither compiles under ``auto``. (The same
#: script at load 25 had put the evaluation's break-even at 199 340 pairs: noise.) The evaluation's
#: batch size: bench_eval_batch.py (eval_batch_amx.md, quiet, 3 interleaved repeats) found the
#: config's 64 the best of 16-128 over the default sizes (geometric means of pairs/s relative to it:
#: 16 0.84x, 32 0.97x, 128 0.87x; only at L1 was 32 ahead, 1.03x, inside the repeats' spread), so this
#: kind's ``evaluation.batch_size: auto`` is 64 (a Zen 3 measured otherwise: ``amd-zen3`` below).
PROFILES: dict[str, CpuProfile] = {
    "intel-amx": CpuProfile(
        kind="intel-amx",
        near_tie_factor=4.0,
        eval_compile_pairs=None,
        train_compile_steps=None,
        source=(
            "benchmarks/results/eval_precision_amx.md, benchmarks/results/compile_amx.md, "
            "benchmarks/results/eval_batch_amx.md"
        ),
    ),
}
#: Any other CPU: the settings used before the table (no compiled graphs, safety factor 3).
FALLBACK = CpuProfile(
    kind="unmeasured",
    near_tie_factor=3.0,
    eval_compile_pairs=None,
    train_compile_steps=None,
    source="none: the conservative defaults",
)

#: AMD without bf16 units, Zen 3 aside (measured on an EPYC, family 23 model 49, Zen 2: AVX2), where
#: everything runs in fp32: PyTorch's fp32 GEMM (MKL) reached 46 GFLOP/s where oneDNN's reached 67 on
#: the same shape in the same rounds, and the fused encoder's fp32 forward was 1.11x-1.20x the eager
#: one over L1-L6, its dev pass 1.17x (geometric mean; fused_encoder_fp32_zen2.md, quiet, 3
#: interleaved repeats), its scores within 2.4e-07 of eager's; on the default's final checkpoints
#: the evaluation met the statistical bar (fused_fp32_bar_zen2.md). So this kind scores fp32
#: through the fused encoder. Its evaluation batch size: bench_eval_batch.py (eval_batch_zen2.md,
#: quiet, 5 interleaved repeats of the fused fp32 pass, the only one on this kind) found the config's
#: 64 the best of 16-128 over the default sizes (geometric means relative to it: 16 0.956x, 32 0.995x,
#: 128 0.961x), so its ``evaluation.batch_size: auto`` is 64, as the Xeon's is. Its training
#: steps in fp32 (no bf16 units): bench_compile.py (compile_zen2.md, quiet, a cold inductor cache, 9
#: interleaved repeats) found the eager fp32 step at 64-77% of the same run's fp32 matmul peak over
#: L1-L6 and the compiled one 0.89x-0.94x of its speed (slower at every size, 31-59 s to compile), so
#: the training step never compiles under ``auto`` here either. The near-tie factor is the fallback's
#: (no bf16 scoring here), and the evaluation's compile threshold is moot (it compiles bf16 scoring).
PROFILES["amd-avx2"] = CpuProfile(
    kind="amd-avx2",
    near_tie_factor=FALLBACK.near_tie_factor,
    eval_compile_pairs=None,
    train_compile_steps=None,
    source=(
        "benchmarks/results/fused_encoder_fp32_zen2.md, benchmarks/results/fused_fp32_bar_zen2.md, "
        "benchmarks/results/eval_batch_zen2.md, benchmarks/results/compile_zen2.md"
    ),
    fused_fp32=True,
)


#: AMD Zen 3 (measured on an EPYC, family 25 model 1: AVX2, no AVX-512, no bf16 units), where
#: everything runs in fp32 as on the Zen 2 but the fp32 GEMMs rank the other way: PyTorch's (MKL)
#: reached 96 GFLOP/s where oneDNN's reached 81 on the same shape in the same rounds, and the fused
#: oneDNN encoder's fp32 forward ran 0.78x-0.89x the eager one over L1-L6, its dev pass 0.82x
#: (geometric mean; fused_encoder_fp32_zen3.md, load 0.84-1.00, 3 interleaved repeats, every size's
#: ranges apart); end to end, on the default's final checkpoints (dev and test, batch 16), the eager
#: evaluation took 0.97x the fused one's time (median over 6, range 0.91-1.01x; fused_fp32_bar_zen3.md).
#: So this kind scores fp32 eagerly, the reference path (no statistical bar to meet).
#: Its evaluation batch size is 16, the one kind measured with another best than 64: bench_eval_batch.py
#: on the eager fp32 pass found 16 ahead of 64 in two runs of one day (geometric means of pairs/s over
#: L1, L2, L4, L6 relative to 64: 16 1.085x, 32 1.010x, 128 0.965x in eval_batch_zen3.md, 3 interleaved
#: repeats; 16 1.117x in eval_batch_zen3_16_64.md, 16 and 64 alone, 7 repeats), and on the default's final
#: checkpoints batch 16 meets the statistical bar against 64 (eval_batch_bar_zen3.md), every score
#: identical. A fresh default at 16 did not show the gain (default_run_zen3_b16.md: evaluation jobs
#: 21.8 job-min against 21.6 at 64 the same day); 16 stays, as it costs nothing there. Its training
#: step and compile threshold are the fallback's (not measured here: no compile).
PROFILES["amd-zen3"] = CpuProfile(
    kind="amd-zen3",
    near_tie_factor=FALLBACK.near_tie_factor,
    eval_compile_pairs=None,
    train_compile_steps=None,
    source=(
        "benchmarks/results/fused_encoder_fp32_zen3.md, benchmarks/results/fused_fp32_bar_zen3.md, "
        "benchmarks/results/eval_batch_zen3.md, "
        "benchmarks/results/eval_batch_zen3_16_64.md, benchmarks/results/eval_batch_bar_zen3.md"
    ),
    fused_fp32=False,
    eval_batch_size=16,
)


#: AMD with AVX512-BF16 (Zen 4/5; measured on an EPYC, family 25 model 17, Zen 4, 2 cores): the fp32
#: scoring (the near ties' rescoring) through the fused oneDNN encoder ran 1.18x-1.34x the eager fp32
#: forward over L1-L6 (oneDNN's fp32 GEMM 108 GFLOP/s against PyTorch's 89 on the same shape, the
#: fused forward at 87-88% of it), its dev pass 1.25x (geometric mean; fused_encoder_fp32_zen4.md,
#: quiet, 5 interleaved repeats), its scores within 3.1e-07 of eager's; on the default's final
#: checkpoints the evaluation met the statistical bar (only CE@16 moved, by at most 1.45e-06 of its
#: SE; fused_fp32_bar_zen4.md). So this kind rescores its near ties through the fused encoder. Its bf16
#: scoring with the compiled kernels (bench_eval_precision.py, eval_precision_zen4.md: the fresh
#: default's 18 final checkpoints, dev and test): the bar met (0 of 396 values above a quarter SE), the
#: largest error of a checkpoint-split at most 2.43 x its calibration sample's and 0.81 e at the
#: fallback's factor 3, which it keeps (the Xeon's 3.54 needed 4). bench_compile.py (compile_zen4.md,
#: quiet, a cold inductor cache, 7 interleaved repeats): the eager bf16 training step at 49-57% of the
#: same run's bf16 matmul peak over L1-L6 and the compiled one 0.84x-0.92x of its speed (slower at
#: every size, 20-52 s to compile); the compiled evaluation forward 0.99x-1.07x the eager one, where
#: the fused encoder with the kernels runs 1.12x-1.18x (fused_encoder_zen4.md): nothing compiles here.
#: Its evaluation batch size: bench_eval_batch.py (eval_batch_zen4.md, quiet, 3 interleaved repeats,
#: bf16 + 0.168 x the fp32 pass) found the config's 64 the best of 16-128 over the default sizes
#: (geometric means relative to it: 16 0.963x, 32 0.976x, 128 0.986x), so its
#: ``evaluation.batch_size: auto`` is 64. Measured on Zen 4 only; a Zen 5 gets these settings until
#: it is measured.
PROFILES["amd-avx512-bf16"] = CpuProfile(
    kind="amd-avx512-bf16",
    near_tie_factor=FALLBACK.near_tie_factor,
    eval_compile_pairs=None,
    train_compile_steps=None,
    source=(
        "benchmarks/results/fused_encoder_fp32_zen4.md, benchmarks/results/fused_fp32_bar_zen4.md, "
        "benchmarks/results/eval_precision_zen4.md, benchmarks/results/fused_encoder_zen4.md, "
        "benchmarks/results/compile_zen4.md, benchmarks/results/eval_batch_zen4.md"
    ),
    fused_fp32=True,
)


#: AMD's family number of Zen 3 and Zen 4 (Zen 1/2 are family 23, Zen 5 is 26); without bf16 units
#: it is a Zen 3 (Zen 4 has AVX512-BF16).
ZEN3_FAMILY = 25


def cpu_kind(
    flags: frozenset[str] | None = None, vendor: str | None = None, family: int | None = None
) -> str:
    """The CPU's kind for :data:`PROFILES`: ``intel-amx`` (AMX-BF16 tiles), ``amd-avx512-bf16``
    (Zen 4/5), ``intel-avx512-bf16`` (Cooper Lake), ``amd-zen3`` (family 25 without bf16 units),
    ``amd-avx2`` (another AMD CPU without bf16 units: Zen 1/2, AVX2 the widest vectors), else
    ``no-bf16``. The two AVX2 kinds differ in which fp32 GEMM is faster (see their profiles)."""
    unit = cpu_bf16_units(flags)
    vendor = cpu_vendor() if vendor is None else vendor
    if unit == "amx_bf16":
        return "intel-amx"
    if unit == "avx512_bf16":
        return "amd-avx512-bf16" if "AMD" in vendor else "intel-avx512-bf16"
    if "AMD" not in vendor:
        return "no-bf16"
    family = cpu_family() if family is None else family
    return "amd-zen3" if family == ZEN3_FAMILY else "amd-avx2"


def cpu_profile(kind: str | None = None) -> CpuProfile:
    """The measured profile of ``kind`` (default: this CPU's), else :data:`FALLBACK`."""
    return PROFILES.get(cpu_kind() if kind is None else kind, FALLBACK)


def eval_batch_size(requested: int | str, device: str) -> int:
    """The evaluation's batch size for config ``evaluation.batch_size`` on ``device``: a number as
    given; ``auto``, on a CPU the kind's measured one (:attr:`CpuProfile.eval_batch_size`), on a GPU
    the fallback's 64 (no GPU is measured: the paper's config sets its own)."""
    if requested != "auto":
        return int(requested)
    return cpu_profile().eval_batch_size if device == "cpu" else FALLBACK.eval_batch_size
