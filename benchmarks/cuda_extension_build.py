"""Compile the windowed-attention extension's CUDA build without a GPU and record the result.

Run by ``scripts/compile_cuda_extension.sh`` in its throwaway venv (PyPI's CUDA build of torch,
PyPI's nvcc, ``CUDA_HOME``, ``TORCH_CUDA_ARCH_LIST`` and ``RERANK_SCALING_BUILD_DIR`` set): it
calls :func:`rerank_scaling.compute.extension_build.build` with CUDA, as
``python -m rerank_scaling.compute.extension_build`` does on a login node, and writes what came
out (success, compile time, nvcc and torch versions, the library's size and the architectures in it,
or the exact error) to ``benchmarks/results/cuda_extension_build.md``. Loading the library here is
recorded too; running its kernels needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import time
import traceback
from pathlib import Path

import torch
from benchmark_output import emit

from rerank_scaling.compute import extension_build
from rerank_scaling.precision import cpu_name


def command_output(*command: str) -> str:
    """A tool's output (stdout and stderr), or why it did not run."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as err:
        return f"{command[0]}: {err}"
    return (done.stdout + done.stderr).strip()


def commit() -> str:
    head = command_output("git", "-C", str(extension_build.REPO), "rev-parse", "--short", "HEAD")
    dirty = command_output("git", "-C", str(extension_build.REPO), "status", "--porcelain", "kernels", "src")
    return head + (" (kernels or src modified)" if dirty else "")


def architectures(library: Path) -> str:
    """The GPU code in ``library`` (``cuobjdump --list-elf``), where the wheels ship cuobjdump."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        return "not listed (no cuobjdump)"
    listing = command_output(tool, "--list-elf", str(library))
    found = sorted({word for word in listing.replace(".", " ").split() if word.startswith("sm_")})
    return ", ".join(found) or listing.splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install-seconds", type=float, required=True)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    nvcc = Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    error = loaded = None
    try:
        extension_build.build(with_cuda=True)
        loaded = "yes: torch.ops.window_attention registered (its kernels run only on a GPU)"
    except Exception:  # the report records any failure verbatim
        error = traceback.format_exc()
    seconds = time.perf_counter() - start
    directory = extension_build.BUILD_DIR / extension_build.build_name(with_cuda=True)
    library = directory / f"{directory.name}.so"
    built = library.exists()
    if built and error is not None:
        loaded = f"no (the library was built): {error.strip().splitlines()[-1]}"
    rows = [
        ("result", "compiled" if built else "FAILED"),
        ("compile time (s)", f"{seconds:.0f}" + (" (loading included)" if loaded else "")),
        ("install time (s, mostly download)", f"{args.install_seconds:.0f}"),
        ("torch", f"{torch.__version__} (CUDA {torch.version.cuda})"),
        ("nvcc", command_output(str(nvcc), "--version").splitlines()[-1]),
        ("gcc", command_output("gcc", "--version").splitlines()[0]),
        ("TORCH_CUDA_ARCH_LIST", os.environ.get("TORCH_CUDA_ARCH_LIST", "")),
        ("MAX_JOBS", os.environ.get("MAX_JOBS", "")),
        ("GPU visible", str(torch.cuda.is_available())),
        ("1-min load average before, after", f"{load_before:.2f}, {os.getloadavg()[0]:.2f}"),
        ("library size (MB)", f"{library.stat().st_size / 1e6:.2f}" if built else "none"),
        ("GPU code in the library", architectures(library) if built else "none"),
        ("loaded without a GPU", loaded or "not reached"),
    ]
    lines = [
        "# The CUDA extension compiled without a GPU",
        "",
        f"CPU {cpu_name()}, {platform.machine()}, {os.cpu_count()} cores; commit {commit()}.",
        "",
        "Command: `scripts/compile_cuda_extension.sh` (a throwaway venv with PyPI's torch and nvcc, "
        "then `benchmarks/cuda_extension_build.py`).",
        "",
        "| what | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in rows),
    ]
    if error is not None and not built:
        lines += ["", "## The error", "", "```", error.strip()[-6000:], "```"]
    emit("\n".join(lines) + "\n", args.out)
    if not built:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
