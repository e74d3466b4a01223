"""Build and load the windowed-attention extension (``kernels/window_attention``) safely on clusters.

* **Ahead of time**: ``python -m rerank_scaling.compute.extension_build`` (``scripts/install.sh``
  runs it only when a config asks for windowed attention, ``--if-configured``, or with
  ``BUILD_EXTENSION=1``); a job then only loads it. A login node without a GPU builds the CUDA
  kernels for ``TORCH_CUDA_ARCH_LIST`` (e.g. ``"8.0;9.0"``), and a GPU job loads that build when
  its list covers the job's GPU (:func:`prebuilt_cuda`, no nvcc needed there). A job that finds no
  build compiles it itself.
* **One build per toolchain and target**: the build directory's name is a hash of what makes a
  build loadable, :func:`build_key`: torch's version, the CUDA version torch was built for, the
  CUDA architectures (``TORCH_CUDA_ARCH_LIST``, else the visible GPUs' compute capabilities) and
  this CPU's instruction-set flags (the C++ code is compiled with ``-march=native``). An sm_90 build
  is never loaded on an A100, nor a build from a newer CPU on an older one.
* **Never a build of other sources**: a finished build records the digest of the kernel sources it
  was compiled from (:func:`sources_digest`) beside its key, and a prebuilt CUDA library is loaded
  only where that digest is the checkout's; otherwise the job compiles (torch's ``load``, whose
  ninja rebuilds what changed), as it does for every CPU build. An edited kernel never computes
  with the library of its old text.
* **A failed or mismatched build falls back**: if the CUDA build fails (an nvcc that does not
  match torch's CUDA, a missing toolkit) the CPU-only build is tried; if that fails too, or the
  library does not load, :func:`load_kernels` returns None after a warning and the callers use the
  PyTorch reference path (same results, slower).
* **No lock that can hang forever**: torch's own build lock (``FileBaton``, a ``lock`` file) is
  left behind by a killed build and makes every later job wait for ever. Builds here take an
  ``flock`` first (released by the kernel when its holder dies, so never stale), remove a leftover
  ``lock`` file under it, and give up waiting after ``RERANK_SCALING_BUILD_TIMEOUT`` seconds
  (default 1800) with a warning and the reference path.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from rerank_scaling.stage_code import COMPILED_SOURCES, compiled_lines

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
#: The kernels' folder in the checkout (the compiled code of this module's importers: stage_code).
KERNEL_FOLDER = COMPILED_SOURCES["compute.extension_build"]
KERNEL_DIR = REPO / KERNEL_FOLDER
BUILD_DIR = Path(os.environ.get("RERANK_SCALING_BUILD_DIR", REPO / "build")) / "torch_extensions"
BUILD_TIMEOUT_S = float(os.environ.get("RERANK_SCALING_BUILD_TIMEOUT", 1800))
CPU_SOURCES = (
    "window_attention.cpp",
    "cpu/window_matmul_cpu.cpp",
    "cpu/fused_attention_cpu.cpp",
    "cpu/packed_attention_cpu.cpp",
)
CUDA_SOURCE = "cuda/window_matmul_cuda.cu"


def cuda_toolkit() -> bool:
    """Whether the CUDA kernels can be compiled here: torch is a CUDA build, nvcc exists, and there
    is a target: a visible GPU, or ``TORCH_CUDA_ARCH_LIST`` (a login node without a GPU)."""
    from torch.utils.cpp_extension import CUDA_HOME

    nvcc = CUDA_HOME is not None and (Path(CUDA_HOME) / "bin" / "nvcc").exists()
    target = torch.cuda.is_available() or bool(os.environ.get("TORCH_CUDA_ARCH_LIST"))
    return torch.version.cuda is not None and nvcc and target


def cpu_flags() -> str:
    """This CPU's instruction-set flags and machine (the build uses ``-march=native``)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next((line for line in text.splitlines() if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return f"{flags}|{os.uname().machine}"


def cuda_architectures() -> str:
    """``TORCH_CUDA_ARCH_LIST`` (what torch compiles for), else the visible GPUs' capabilities."""
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if listed:
        return listed
    capabilities = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
    return ";".join(f"{major}.{minor}" for major, minor in sorted(capabilities))


def build_key(with_cuda: bool) -> dict[str, str]:
    """What a build depends on beyond its sources (ninja tracks those): the module docstring's list."""
    return {
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda) if with_cuda else "none",
        "arch": cuda_architectures() if with_cuda else "none",
        "cpu": cpu_flags(),
    }


def sources_digest() -> str:
    """SHA-256 of the kernel sources of the checkout (every C++/CUDA file under
    :data:`KERNEL_FOLDER`, byte for byte: :func:`~rerank_scaling.stage_code.compiled_lines`)."""
    return hashlib.sha256("\n".join(compiled_lines(REPO, KERNEL_FOLDER)).encode()).hexdigest()


def build_record(with_cuda: bool) -> dict[str, str]:
    """What a finished build's ``build_key.json`` holds: its :func:`build_key` and the
    :func:`sources_digest` it was compiled from."""
    return {**build_key(with_cuda), "sources": sources_digest()}


def build_name(with_cuda: bool) -> str:
    digest = hashlib.sha1(json.dumps(build_key(with_cuda), sort_keys=True).encode()).hexdigest()[:12]
    return f"window_attention_{'cuda' if with_cuda else 'cpu'}_{digest}"


class BuildLock:
    """An exclusive ``flock`` on ``<directory>/build.flock`` that waits at most ``timeout`` seconds."""

    def __init__(self, directory: Path, timeout: float = BUILD_TIMEOUT_S):
        self.path = directory / "build.flock"
        self.timeout = timeout
        self.handle: Any = None

    def __enter__(self) -> BuildLock:
        self.handle = open(self.path, "a")
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    self.handle.close()
                    raise TimeoutError(
                        f"another process has built in {self.path.parent} for over {self.timeout:.0f} s "
                        "(RERANK_SCALING_BUILD_TIMEOUT)"
                    ) from err
                time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _ninja_on_path() -> None:
    """torch runs the ``ninja`` it finds on PATH: put the environment's own (the ``ninja`` package)
    first, always. Two ninjas do not share a build: each discards a log of the other's version
    and rebuilds everything (Debian's ninja 1.11.1 writes log v5, the package's 1.13.2 log v7), so an
    install run before the venv was on PATH (``run.sh``, ``test.sh``) built with the system's ninja
    and the first evaluation job of the default built again (24 s, a second job waiting on the lock)."""
    import ninja

    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != ninja.BIN_DIR:
        os.environ["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{path}"


def build(with_cuda: bool, verbose: bool = False) -> Any:
    """Compile (or reuse) and load one build (raises on any failure): ``torch.ops.window_attention``."""
    from torch.utils.cpp_extension import load

    _ninja_on_path()
    name = build_name(with_cuda)
    directory = BUILD_DIR / name
    directory.mkdir(parents=True, exist_ok=True)
    sources = [KERNEL_DIR / source for source in CPU_SOURCES] + (
        [KERNEL_DIR / CUDA_SOURCE] if with_cuda else []
    )
    flags = ["-O3", "-fopenmp", "-march=native", "-Wno-psabi"] + (["-DWITH_CUDA"] if with_cuda else [])
    with BuildLock(directory):
        stale = directory / "lock"  # torch's FileBaton: under our flock, only a dead build left it
        if stale.exists():
            log.warning("removing %s, left by a build that was killed", stale)
            stale.unlink()
        load(
            name=name,
            sources=[str(path) for path in sources],
            extra_cflags=flags,
            extra_cuda_cflags=["-O3", "-DWITH_CUDA"],
            extra_ldflags=["-fopenmp"],
            build_directory=str(directory),
            with_cuda=with_cuda,
            is_python_module=False,
            verbose=verbose,
        )
    (directory / "build_key.json").write_text(json.dumps(build_record(with_cuda), indent=1, sort_keys=True))
    return torch.ops.window_attention


def prebuilt_cuda() -> Path | None:
    """A finished CUDA build (its ``build_key.json`` written) for this torch, CUDA and CPU and of
    the checkout's kernel sources, whose architecture list covers every visible GPU: an
    ahead-of-time build made with ``TORCH_CUDA_ARCH_LIST`` on a login node, loaded on a compute node
    without compiling (nvcc need not be there). None when there is none."""
    wanted = build_record(with_cuda=True)
    capabilities = {
        f"{major}.{minor}"
        for major, minor in map(torch.cuda.get_device_capability, range(torch.cuda.device_count()))
    }
    for key_file in sorted(BUILD_DIR.glob("window_attention_cuda_*/build_key.json")):
        key = json.loads(key_file.read_text())
        built_for = {arch.removesuffix("+PTX") for arch in key.get("arch", "").replace(" ", ";").split(";")}
        same = all(key.get(field) == wanted[field] for field in ("torch", "cuda", "cpu", "sources"))
        library = key_file.parent / f"{key_file.parent.name}.so"
        if same and capabilities <= built_for and library.exists():
            return library
    return None


_LOADED: dict[str, Any] = {}  # "ops" -> the op namespace or None, "cuda" -> whether CUDA kernels are in


def load_kernels(verbose: bool = False) -> Any | None:
    """The extension's ops (``torch.ops.window_attention``), built on first use; None (after a
    warning) when no build works here, so the callers take the reference path."""
    if "ops" in _LOADED:
        return _LOADED["ops"]
    prebuilt = prebuilt_cuda() if torch.cuda.is_available() else None
    attempts = [True, False] if prebuilt or cuda_toolkit() else [False]
    for with_cuda in attempts:
        try:
            if with_cuda and prebuilt:
                torch.ops.load_library(str(prebuilt))
                ops = torch.ops.window_attention
            else:
                ops = build(with_cuda, verbose)
            _LOADED.update(ops=ops, cuda=with_cuda)
            return _LOADED["ops"]
        except Exception as err:  # a compiler, linker, loader or lock failure: fall back
            kind = "CUDA" if with_cuda else "CPU"
            warnings.warn(
                f"the windowed-attention extension's {kind} build failed ({type(err).__name__}: "
                f"{str(err).strip().splitlines()[-1] if str(err).strip() else err!r}); "
                + ("trying the CPU-only build" if with_cuda else "using the PyTorch reference path"),
                RuntimeWarning,
                stacklevel=2,
            )
    _LOADED.update(ops=None, cuda=False)
    return None


def built_kernels() -> Any | None:
    """The extension's ops where a CPU build for this torch and CPU exists here (made ahead of time by
    ``scripts/install.sh``, or by an earlier job), loaded through :func:`load_kernels` (which
    recompiles what changed since, so a stale build is never loaded); None where there is none yet,
    without compiling one: for callers that have a PyTorch path as fast as a first build is slow
    (the fused evaluation encoder's attention)."""
    if "ops" in _LOADED:
        return _LOADED["ops"]
    name = build_name(with_cuda=False)
    if not (BUILD_DIR / name / f"{name}.so").exists():
        return None
    return load_kernels()


def kernels_on(device_type: str) -> bool:
    """Whether the compiled ops run on tensors of ``device_type`` (else the reference path)."""
    ops = load_kernels()
    return ops is not None and (device_type == "cpu" or (device_type == "cuda" and _LOADED["cuda"]))


def windowed_configs(paths: list[Path]) -> list[Path]:
    """The config files (of ``paths`` that exist) whose ``training.attention`` names a windowed
    variant (``window<w>``; ``full`` runs the model's own attention and needs no extension). Each
    file as written: one that gives no ``training.attention`` (an overlay of another; the key has
    no default) asks for nothing."""
    import yaml

    from rerank_scaling.settings import written_section

    asking = []
    for path in paths:
        if path.is_file():
            training = written_section(yaml.safe_load(path.read_text()), "training")
            if "attention" in training and any(name != "full" for name in training["attention"]):
                asking.append(path)
    return asking


def scores_with_packed_attention() -> bool:
    """Whether this CPU's evaluation scores in bf16 through the fused encoder, whose attention is the
    extension's ``packed_attention`` where it is built (:mod:`rerank_scaling.compute.fused_encoder`):
    oneDNN has bf16 here (AMX-BF16 or AVX512-BF16 units)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def main(argv: list[str] | None = None) -> None:
    """``python -m rerank_scaling.compute.extension_build [--verbose]``: build ahead of time."""
    import argparse

    parser = argparse.ArgumentParser(description="Build the windowed-attention extension ahead of time.")
    parser.add_argument("--verbose", action="store_true", help="show the compiler commands")
    parser.add_argument(
        "--if-configured",
        nargs="+",
        metavar="CONFIG",
        help="build only when one of these config files asks for windowed attention, or this CPU "
        "scores in bf16 (the fused evaluation encoder's attention kernel)",
    )
    args = parser.parse_args(argv)
    if args.if_configured is not None:
        asking = windowed_configs([Path(path) for path in args.if_configured])
        if not asking and not scores_with_packed_attention():
            print(
                "window_attention extension: not built, no windowed attention in "
                f"{' '.join(args.if_configured)} and no bf16 scoring on this CPU "
                "(BUILD_EXTENSION=1 scripts/install.sh builds it)",
                file=sys.stderr,
            )
            return
    if load_kernels(verbose=args.verbose) is None:
        raise SystemExit("window_attention extension: no build works here (see the warnings above)")
    kind = "CPU + CUDA" if _LOADED["cuda"] else "CPU"
    print(
        f"window_attention extension ({kind}) ready in {BUILD_DIR / build_name(_LOADED['cuda'])}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
