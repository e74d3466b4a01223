"""Per-stage CPU and wall time of finished workflow runs, side by side, from Snakemake's benchmark files.

    python benchmarks/stage_cpu.py results/default results/cand --time-file /tmp/cand_time.txt \
        --out benchmarks/results/default_stages_cpu.md

On a shared machine a DAG's wall time says more about the neighbours than about the DAG; the CPU
time its jobs used (user + sys, Snakemake's ``cpu_time``, :func:`rerank_scaling.workflow.timing.job_times`)
does not. The DAG's wall time on ``cores`` otherwise idle cores is then estimated as
(total CPU seconds) / cores + the serial stages (data, BM25, fit, plan, report run one at a time),
a lower bound that ignores the tail where one core idles. ``--time-file`` takes ``/usr/bin/time``'s
output for the whole ``snakemake`` process tree (``CPU user U sys S wall W``), a cross-check of the
summed per-job CPU times (Snakemake samples them, and misses short-lived children). Run the
workflows it reads with ``RERANK_SCALING_JOB_SERVER=off``: with the job server a job's CPU time
is spent in a process Snakemake's benchmark does not see (:mod:`rerank_scaling.workflow.job_server`).
"""

from __future__ import annotations

import argparse
import math
import re
from collections import defaultdict
from pathlib import Path

from benchmark_output import emit

from rerank_scaling.precision import cpu_name
from rerank_scaling.workflow.timing import job_times

SERIAL = ("data", "bm25", "examples", "laws", "planning", "report")


def stage_sums(results: Path) -> dict[str, tuple[int, float, float]]:
    """stage -> (jobs, summed wall seconds, summed CPU seconds)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for job in job_times(results):
        entry = sums[job.stage]
        entry[0] += 1
        entry[1] += job.wall_s
        entry[2] += 0.0 if math.isnan(job.cpu_s) else job.cpu_s
    return {stage: (int(v[0]), v[1], v[2]) for stage, v in sorted(sums.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path, nargs="+", help="finished runs' results directories")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--time-file", nargs="*", default=[], help="/usr/bin/time output per results dir")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    runs = {str(r): stage_sums(r) for r in args.results}
    stages = sorted({s for sums in runs.values() for s in sums})
    header = " | ".join(f"{r}: jobs, wall s, CPU s" for r in runs)
    lines = [
        "# CPU time per stage (Snakemake benchmark files)",
        "",
        f"CPU: **{cpu_name()}**; estimates for {args.cores} cores.",
        "",
        f"| stage | {header} |",
        "|---|" + "---:|" * len(runs),
    ]
    for stage in stages:
        cells = []
        for sums in runs.values():
            jobs, wall, cpu = sums.get(stage, (0, 0.0, 0.0))
            cells.append(f"{jobs}, {wall:.0f}, {cpu:.0f}")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| run | CPU s, all jobs | of which serial stages | estimated DAG wall min |",
        "|---|---:|---:|---:|",
    ]
    for run, sums in runs.items():
        total = sum(cpu for _, _, cpu in sums.values())
        serial = sum(sums[s][2] for s in SERIAL if s in sums)
        estimate = (serial + (total - serial) / args.cores) / 60
        lines.append(f"| {run} | {total:.0f} | {serial:.0f} | {estimate:.1f} |")
    for run, path in zip(runs, args.time_file, strict=False):
        found = re.search(r"user ([\d.]+) sys ([\d.]+) wall ([\d.]+)", Path(path).read_text())
        if found:
            user, system, wall = map(float, found.groups())
            lines.append(
                f"\n{run}, the whole snakemake process tree (`/usr/bin/time`): user {user:.0f} s + sys "
                f"{system:.0f} s = **{(user + system) / 60:.1f} CPU min**, i.e. at least "
                f"{(user + system) / args.cores / 60:.1f} min on {args.cores} idle cores; its wall time on "
                f"the shared machine was {wall / 60:.1f} min."
            )
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
