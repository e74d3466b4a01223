"""A whole workflow run at two commits, in interleaved repeats: wall, CPU and bytes written.

    python benchmarks/bench_dag_ab.py BEFORE AFTER --config tests/configs/tiny.yaml \
        --out benchmarks/results/tiny_dag_ab_zen3.md

Each repeat runs, in a shuffled order, ``snakemake --cores N`` on a fresh copy of each commit's
workflow (``git archive`` of the files a checkout runs: Snakefile, config.yaml, rules, envs, report,
src) with the config given, its jobs importing that copy's ``src``, and each run's folder is removed
after it, as a test module's is. Per run: the wall seconds, the user and system CPU seconds of the
whole process tree (``getrusage`` of the reaped children: Snakemake, its job server and jobs) and
the blocks it wrote to file systems (``ru_oublock``, 512 bytes each). The test suite runs this
tiny config's DAG, whole or in part, in most of its workflow tests.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmark_output import REPO, emit
from interleaved import span

from rerank_scaling.precision import cpu_name

WORKFLOW = ("Snakefile", "config.yaml", "rules", "envs", "report", "src")


def export_tree(commit: str, target: Path) -> str:
    """The workflow files of ``commit`` under ``target``; returns its short name."""
    target.mkdir(parents=True)
    archive = target / "tree.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), commit, *WORKFLOW], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    archive.unlink()
    short = ["git", "-C", str(REPO), "rev-parse", "--short", commit]
    return subprocess.run(short, capture_output=True, text=True, check=True).stdout.strip()


def children() -> tuple[float, float, int]:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime, usage.ru_oublock


def run_once(tree: Path, config: Path, cores: int, scratch: Path) -> dict[str, float]:
    """One fresh run of ``tree``'s workflow on ``config``: its wall, CPU and written MB."""
    workdir = scratch / f"run-{time.monotonic_ns()}"
    shutil.copytree(tree, workdir)
    shutil.copy(config, workdir / "run.yaml")
    env = {**os.environ, "PYTHONPATH": str(workdir / "src")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("RERANK_SCALING_JOB_SERVER", None)  # each run starts its own job server, as a user's does
    command = [sys.executable, "-m", "snakemake", "--configfile", "run.yaml", "--cores", str(cores)]
    user, system, blocks = children()
    began = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = children()
    if done.returncode != 0:
        raise RuntimeError(f"{tree.name}: snakemake failed:\n{(done.stdout + done.stderr)[-3000:]}")
    shutil.rmtree(workdir)
    return {
        "wall": wall,
        "user": after[0] - user,
        "system": after[1] - system,
        "written_mb": (after[2] - blocks) * 512 / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="a commit")
    parser.add_argument("after", help="a commit")
    parser.add_argument("--config", type=Path, default=REPO / "tests" / "configs" / "tiny.yaml")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="of the shuffled order")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    started, load_before = time.time(), os.getloadavg()[0]
    scratch = Path(tempfile.mkdtemp(prefix="bench-dag-ab-"))
    try:
        trees = {}
        for label in ("before", "after"):
            tree = scratch / f"tree-{label}"
            trees[label] = (export_tree(getattr(args, label), tree), tree)
        order = random.Random(args.seed)
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        for repeat in range(args.repeats):
            for label in order.sample(list(trees), len(trees)):
                runs[label].append(run_once(trees[label][1], args.config, args.cores, scratch))
                print(f"repeat {repeat + 1} {label}: {runs[label][-1]}", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    config = (
        args.config.resolve().relative_to(REPO) if args.config.resolve().is_relative_to(REPO) else args.config
    )
    lines = [
        f"# One workflow run at two commits: {config}",
        "",
        f"`python benchmarks/bench_dag_ab.py {trees['before'][0]} {trees['after'][0]} --config {config} "
        f"--cores {args.cores} --repeats {args.repeats}` on **{cpu_name()}**, {os.cpu_count()} CPUs; "
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run time "
        f"{(time.time() - started) / 60:.1f} min; files under {tempfile.gettempdir()}.",
        "",
        f"Each of {args.repeats} repeats ran both commits' workflow, fresh, in a shuffled order. Cells: "
        "median (min-max) over the repeats; CPU: the process tree's (Snakemake, its job server and "
        "jobs); MB written: its file-system output blocks.",
        "",
        "| commit | wall seconds | user CPU seconds | system CPU seconds | MB written |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, (name, _) in trees.items():
        cells = [
            span([run[key] for run in runs[label]], 1, digits)
            for key, digits in (("wall", 1), ("user", 1), ("system", 1), ("written_mb", 0))
        ]
        lines.append(f"| {label} ({name}) | " + " | ".join(cells) + " |")
    ratio = {
        key: statistics.median(r[key] for r in runs["before"])
        / statistics.median(r[key] for r in runs["after"])
        for key in ("wall", "user", "system", "written_mb")
    }
    lines += [
        "",
        "before / after (medians): "
        + ", ".join(f"{key.replace('_mb', '')} {value:.2f}x" for key, value in ratio.items())
        + ".",
    ]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
