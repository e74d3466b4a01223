"""The windowed-attention extension on a cluster: built ahead of time only where a
config asks for it; a build that fails, or a build lock held by a dead or stuck build, falls back to
the PyTorch reference path with a warning instead of failing or hanging the job."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO

from rerank_scaling.compute.extension_build import BUILD_DIR, build_name

# A windowed attention call on CPU, then which path ran: "reference" when no build loaded.
PROBE = """
import torch, warnings
warnings.simplefilter("always")
from rerank_scaling.compute import extension_build as eb
from rerank_scaling.training import window_attention as wa
torch.manual_seed(0)
q, k, v = (torch.randn(1, 2, 9, 4) for _ in range(3))
types = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]])
layout = wa.window_layout(types, torch.ones_like(types), 2)
out = wa.window_attention(q, k, v, layout)
torch.testing.assert_close(out, wa.window_attention_reference(q, k, v, layout))
print("PATH", "compiled" if eb.load_kernels() is not None else "reference")
"""


def run_probe(build_dir, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "RERANK_SCALING_BUILD_DIR": str(build_dir),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=environment, timeout=300
    )


def test_install_builds_the_extension_only_for_windowed_attention_or_bf16_scoring(tmp_path):
    full, windowed = tmp_path / "full.yaml", tmp_path / "windowed.yaml"
    full.write_text(yaml.safe_dump({"training": {"attention": ["full"]}}))
    windowed.write_text(yaml.safe_dump({"training": {"attention": ["full", "window4"]}}))
    command = [sys.executable, "-m", "rerank_scaling.compute.extension_build", "--if-configured"]
    environment = {**os.environ, "PYTHONPATH": str(REPO / "src"), "RERANK_SCALING_BUILD_DIR": str(tmp_path)}
    # a full-attention config (config.yaml, config.paper.yaml) on a CPU without bf16 (oneDNN limited
    # to AVX2, as on such a CPU): no compiler is even looked for
    no_bf16 = {**environment, "CXX": "/bin/false", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    skipped = subprocess.run([*command, str(full)], capture_output=True, text=True, env=no_bf16)
    assert skipped.returncode == 0 and "not built, no windowed attention" in skipped.stderr, skipped.stderr
    assert not (tmp_path / "torch_extensions").exists()
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():  # here the evaluation's bf16 attention wants it
        wanted = subprocess.run(
            [*command, str(full)], capture_output=True, text=True, env={**environment, "CXX": "/bin/false"}
        )
        assert wanted.returncode != 0 and "CPU build failed" in wanted.stderr, wanted.stderr[-2000:]
    # a windowed config with a compiler that fails: a warning and a non-zero exit (install.sh goes on)
    failed = subprocess.run(
        [*command, str(full), str(windowed)],
        capture_output=True,
        text=True,
        env={**environment, "CXX": "/bin/false"},
        timeout=300,
    )
    assert failed.returncode != 0 and "CPU build failed" in failed.stderr, failed.stderr[-2000:]
    assert "reference path" in failed.stderr
    # and the install script does go on after it
    install = (REPO / "scripts" / "install.sh").read_text()
    assert "--if-configured ${CONFIGS:-config.yaml config.paper.yaml} \\\n       || echo" in install


def test_a_failed_build_falls_back_to_the_reference_path_with_a_warning(tmp_path):
    result = run_probe(tmp_path, CXX="/bin/false")  # a compiler that fails (as GCC 8 on -std=c++20)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PATH reference" in result.stdout
    assert "RuntimeWarning" in result.stderr and "using the PyTorch reference path" in result.stderr


def test_a_build_lock_held_too_long_times_out_and_a_dead_builds_lock_is_removed(tmp_path):
    """Another process holds the build's flock (a stuck build): the job waits at most
    RERANK_SCALING_BUILD_TIMEOUT, then runs the reference path. torch's own lock file, left by a
    killed build, is removed under the flock instead of making every later job wait for ever."""
    directory = tmp_path / "torch_extensions" / build_name(with_cuda=False)
    directory.mkdir(parents=True)
    stale = directory / "lock"
    stale.write_text("")  # torch's FileBaton of a build that was killed
    with open(directory / "build.flock", "a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        start = time.monotonic()
        result = run_probe(tmp_path, RERANK_SCALING_BUILD_TIMEOUT="3")
        waited = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PATH reference" in result.stdout and "TimeoutError" in result.stderr, result.stderr[-2000:]
    assert 3 <= waited < 120, waited
    # the holder is gone (as a killed build's flock is): the stale lock is removed, the build goes on
    result = run_probe(tmp_path, CXX="/bin/false")
    assert "removing" in result.stderr and not stale.exists(), result.stderr[-2000:]


def test_a_prebuilt_cuda_library_of_other_kernel_sources_is_never_loaded(tmp_path, monkeypatch):
    """An ahead-of-time CUDA build (a login node's ``TORCH_CUDA_ARCH_LIST`` build) is loaded without
    compiling only while the checkout's kernel sources are those it was built from: after an edit
    of a CUDA source (a comment is enough: the build does not parse them) the job must compile
    instead of computing with the old library. Laid out as install.sh leaves it, on any machine."""
    from rerank_scaling.compute import extension_build as eb

    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / eb.KERNEL_FOLDER, checkout / eb.KERNEL_FOLDER)
    monkeypatch.setattr(eb, "REPO", checkout)
    monkeypatch.setattr(eb, "BUILD_DIR", tmp_path / "torch_extensions")
    monkeypatch.setattr(eb, "cuda_architectures", lambda: "8.0;9.0")  # built for A100 and H100
    build = eb.BUILD_DIR / eb.build_name(with_cuda=True)
    build.mkdir(parents=True)
    (build / "build_key.json").write_text(json.dumps(eb.build_record(with_cuda=True)))
    (build / f"{build.name}.so").write_bytes(b"")
    assert eb.prebuilt_cuda() == build / f"{build.name}.so"  # the sources it was built from
    source = checkout / eb.KERNEL_FOLDER / eb.CUDA_SOURCE
    source.write_text(source.read_text() + "\n// an edit\n")
    assert eb.prebuilt_cuda() is None


def test_a_build_from_a_shell_without_the_venv_is_reused_by_jobs_with_it(tmp_path):
    """run.sh and test.sh install (and build) before the venv is on PATH, the workflow's jobs run
    with it first: both builds must run the same ninja, or the job's ninja discards the other's log
    (another log version) and compiles everything again."""
    import ninja

    venv_bins = {str(Path(sys.executable).parent), ninja.BIN_DIR}
    bare = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p not in venv_bins)
    other = shutil.which("ninja", path=bare)
    if other is None or Path(other).resolve() == (Path(ninja.BIN_DIR) / "ninja").resolve():
        pytest.skip("no second ninja on PATH: nothing can rebuild")
    # Seeded with the install's build where there is one (test.sh builds it from a shell without the
    # venv, as run.sh does): the bare shell's build below then compiles nothing (ninja's log keeps the
    # relative outputs and their mtimes, which the copy keeps), unless the two ninjas differ, and the
    # job must not compile either. Without it, the first build compiles everything (60-80 s).
    installed = BUILD_DIR / build_name(with_cuda=False)
    if (installed / f"{installed.name}.so").exists():
        shutil.copytree(installed, tmp_path / "torch_extensions" / installed.name)
    environment = {**os.environ, "PYTHONPATH": str(REPO / "src"), "RERANK_SCALING_BUILD_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "rerank_scaling.compute.extension_build"]
    built = subprocess.run(
        command, capture_output=True, text=True, env={**environment, "PATH": bare}, timeout=600
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (directory,) = (tmp_path / "torch_extensions").iterdir()
    library = directory / f"{directory.name}.so"
    before = library.stat().st_mtime_ns, (directory / ".ninja_log").read_text()
    job = run_probe(tmp_path, PATH=f"{ninja.BIN_DIR}{os.pathsep}{bare}")
    assert job.returncode == 0 and "PATH compiled" in job.stdout, job.stderr[-2000:]
    assert (library.stat().st_mtime_ns, (directory / ".ninja_log").read_text()) == before, "rebuilt"
