"""Which evaluation jobs score several runs whole: the cost model's side of set-up.

An evaluation job pays a fixed set-up before it scores anything: its process's imports and the
SLURM job step's Snakefile parse once per job, and reading each run's token and text tables once
per run (:class:`EvalSetup`, measured on a CPU by ``benchmarks/bench_eval_job_setup.py``). Its
scoring time is the cost model's (:meth:`rerank_scaling.workflow.job_resources.JobSizes.evaluation_flops`
over ``planning.peak_flops`` x ``mfu``). :func:`evaluation_bundles` gives the runs whose jobs of the
configured ``evaluation.unit`` would spend more than ``cluster.max_setup_share`` of their time on
set-up to rule ``evaluate_bundle``, several runs a job, so that each job's share is at most the
bound. A SLURM job's own start (scheduling, prolog) is not in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rerank_scaling.workflow.job_resources import JobSizes


@dataclass(frozen=True)
class EvalSetup:
    """Set-up seconds: imports and Snakefile parse per job; table reads per candidate pair per run."""

    import_seconds: float
    parse_seconds: float
    read_seconds_per_pair: float


#: Measured (``benchmarks/results/eval_job_setup.md``; tests/test_job_resources.py checks they are
#: that file's).
EVAL_SETUP = EvalSetup(import_seconds=10.09, parse_seconds=4.24, read_seconds_per_pair=6.03e-06)


def setup_share(sizes: JobSizes, runs: list[str], checkpoints: int) -> float | None:
    """Set-up's share of one evaluation job scoring ``checkpoints`` checkpoints of every split of
    each of ``runs`` (None: the cost model cannot price it)."""
    config = sizes.config
    splits = {split: checkpoints for split in config["dataset"]["eval_splits"]}
    flops = [sizes.evaluation_flops(run, splits) for run in runs]
    rate = sizes.flops_per_second
    if rate is None or any(f is None for f in flops):
        return None
    queries, depth = sizes.workload.eval_queries, int(config["evaluation"]["rerank_depth"])
    pairs = sum(queries[split] * depth for split in splits)
    setup = (
        EVAL_SETUP.import_seconds
        + EVAL_SETUP.parse_seconds
        + len(runs) * pairs * EVAL_SETUP.read_seconds_per_pair
    )
    compute = sum(f for f in flops if f is not None) / rate
    return setup / (setup + compute)


def evaluation_bundles(sizes: JobSizes, runs: list[str], checkpoints: int) -> list[list[str]]:
    """Groups of runs that one ``evaluate_bundle`` job scores whole (module docstring): the runs
    whose configured-unit job's set-up share exceeds ``cluster.max_setup_share``, the largest share
    (smallest model) first, a bundle closed once its own share is within the bound, a remainder
    joining the last bundle. Empty when the bound is null or the cost model cannot price the jobs."""
    bound = sizes.cluster.max_setup_share
    per_job = checkpoints if sizes.config["evaluation"]["unit"] == "run" else 1
    shares = {run: setup_share(sizes, [run], per_job) for run in runs}
    if bound is None or any(share is None for share in shares.values()):
        return []
    over = sorted((run for run in runs if shares[run] > bound), key=lambda run: (-shares[run], run))
    bundles: list[list[str]] = []
    current: list[str] = []
    for run in over:
        current.append(run)
        share = setup_share(sizes, current, checkpoints)
        if share is not None and share <= bound:
            bundles.append(current)
            current = []
    if current and bundles:
        bundles[-1].extend(current)
    elif current:
        bundles.append(current)
    return bundles
