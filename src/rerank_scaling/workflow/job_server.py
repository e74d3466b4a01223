"""A job server: import the heavy libraries once, fork each local job from that warm process.

Every training and evaluation job of the DAG starts a Python process that spends ~8 s importing
torch, transformers and sentence_transformers before any work (``python -X importtime``); in the
default DAG and the test suite's small workflows that is a large share of every job. ``serve``
imports those third-party libraries once (never ``rerank_scaling`` itself, so an edited stage's code
is imported fresh by each job, as the stage-code digests assume) and forks a child per request;
``run`` is the job's side: it hands the server its argv, working directory, environment and its
stdin/stdout/stderr (``SCM_RIGHTS``), relays SIGTERM/SIGINT/SIGHUP to the child, and exits with the
child's status (re-raising the child's terminating signal). Without a server, inside a SLURM job (a
forked child would live outside the job's cgroup and accounting) or for anything but ``-m module``,
``run`` execs the interpreter as before.

The Snakefile starts one per local run (:func:`start`, in ``onstart``; not for dry runs, SLURM or
conda/apptainer deployments, whose jobs run another interpreter, nor where its environment names a
server that is :func:`running`, which it then uses and leaves running) and stops it when the run
ends (:func:`stop`); the rules' ``rerank_python`` and ``rerank_python_exec`` go through :func:`run` while
``$RERANK_SCALING_JOB_SERVER`` names its socket. The server dies with Snakemake (``PR_SET_PDEATHSIG``)
and, on SIGTERM, terminates its jobs first.

**What a forked job shares with the server: the libraries' import-time reading of the
environment.** huggingface_hub reads ``HF_HUB_OFFLINE`` and its cache paths once, when imported,
so a job forked from a server imported online would run online although its shell set
``HF_HUB_OFFLINE=1`` (as the compute rules do). The server therefore serves a job only where the
variables of :data:`IMPORT_TIME_PREFIXES` have the same values in the job's environment as in its
own; any other job is told to start as a plain process (:func:`differing`, logged), and the
Snakefile starts the server in the compute jobs' environment (``start(..., env=...)``:
``HF_HUB_OFFLINE=1``). Thread counts are not among them: Snakemake sets ``OMP_NUM_THREADS`` per job
and the jobs that compute call ``torch.set_num_threads`` themselves.

What it changes besides the time: Snakemake's benchmark files measure a job's process tree, which
is now the client's, so their ``cpu_time`` and memory columns (not their wall time ``s``) no longer
describe the job. ``RERANK_SCALING_JOB_SERVER=off`` (:data:`OFF`) runs without a server, for a run
whose CPU or memory per job is being measured (``benchmarks/stage_cpu.py``).
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from rerank_scaling.parent_process import PARENT_VARIABLE, die_with_parent

SERVER_VARIABLE = "RERANK_SCALING_JOB_SERVER"
#: What the server imports once (third-party only: the project's own code is imported per job).
PRELOAD = ("torch", "transformers", "sentence_transformers", "pandas", "pyarrow.parquet", "scipy.optimize")
RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Environment variables the preloaded libraries read once, when imported (huggingface_hub's
#: ``HF_HUB_OFFLINE``, ``HF_HOME`` and cache paths, transformers' and sentence-transformers' own;
#: inductor's and dynamo's configs and torch's logging, which transformers imports): a job is forked
#: only where its values equal the server's.
IMPORT_TIME_PREFIXES = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "SENTENCE_TRANSFORMERS_",
    "XDG_CACHE_HOME",
    "TORCHINDUCTOR_",
    "TORCHDYNAMO_",
    "TORCH_COMPILE_",
    "TORCH_LOGS",
)
#: The import-time environment of the jobs a workflow's server is for: the compute rules' shells set
#: ``HF_HUB_OFFLINE=1`` (models come from the prefetched cache).
COMPUTE_ENV = {"HF_HUB_OFFLINE": "1"}
#: ``$RERANK_SCALING_JOB_SERVER`` set to this: no server is started and jobs start as before.
OFF = "off"


def wanted() -> bool:
    """Whether this run may start a server (the user has not set ``RERANK_SCALING_JOB_SERVER=off``)."""
    return os.environ.get(SERVER_VARIABLE) != OFF


def running(path: str | None = None) -> bool:
    """Whether a server listens at ``path`` (default: the socket ``$RERANK_SCALING_JOB_SERVER``
    names): a Snakemake run whose environment names a running server (a test session's,
    ``tests/conftest.py``) sends its jobs there instead of starting one of its own."""
    path = os.environ.get(SERVER_VARIABLE) if path is None else path
    if path in (None, "", OFF) or not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` that :data:`IMPORT_TIME_PREFIXES` name."""
    return {name: value for name, value in env.items() if name.startswith(IMPORT_TIME_PREFIXES)}


def differing(job_env: dict[str, str], server_env: dict[str, str]) -> list[str]:
    """The import-time variables (:func:`import_time_env`) whose values differ between a job's
    environment and the server's (set in one only, or to other values)."""
    job, server = import_time_env(job_env), import_time_env(server_env)
    return sorted(name for name in job.keys() | server.keys() if job.get(name) != server.get(name))


def _message(sock: socket.socket) -> dict | None:
    """One newline-terminated JSON message (None at end of stream)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def _send(sock: socket.socket, message: dict) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _child(request: dict, fds: list[int], base_path: list[str]) -> None:
    """Become the job: its stdio, directory, environment, sys.path and argv; run its module."""
    for sig in (*RELAYED, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    for name in [m for m in sys.modules if m == "rerank_scaling" or m.startswith("rerank_scaling.")]:
        del sys.modules[name]  # the job imports its own checkout's code, fresh
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ[PARENT_VARIABLE] = str(os.getppid())  # the job's parent is now this server
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request["cwd"], *extra, *base_path]
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if done.code is not None and not isinstance(done.code, int):
            print(done.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def serve(path: str) -> None:
    """Import :data:`PRELOAD`, then fork one child per connection until SIGTERM."""
    import importlib

    die_with_parent()
    children: set[int] = set()

    def terminate(_sig: int, _frame: object) -> None:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    started_env = dict(os.environ)  # the imports below set some (sentence_transformers: inductor's cache dir)
    for name in PRELOAD:
        importlib.import_module(name)
    own = {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p} | {os.getcwd(), ""}
    base_path = [p for p in sys.path if p not in own]
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".binding")
    server.listen(64)
    os.rename(path + ".binding", path)  # the path appears listening: a job either connects or runs plain
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ, ("accept",))
    print(f"job server {os.getpid()} on {path}", flush=True)
    while True:
        for key, _ in selector.select():
            kind = key.data[0]
            if kind == "accept":
                conn, _ = server.accept()
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                if not message:  # a probe (running): connected, then closed
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                request = json.loads(message)
                other = differing(request["env"], started_env)
                if other:  # the preloaded libraries read other values: the job starts on its own
                    print(
                        f"job {request['module']}: started plain (its {', '.join(other)} not the server's)",
                        flush=True,
                    )
                    for fd in fds:
                        os.close(fd)
                    _send(conn, {"plain": other})
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    server.close()
                    conn.close()
                    _child(request, fds, base_path)
                children.add(pid)
                for fd in fds:
                    os.close(fd)
                _send(conn, {"pid": pid})
                pidfd = os.pidfd_open(pid)
                selector.register(conn, selectors.EVENT_READ, ("client", pid, pidfd))
                selector.register(pidfd, selectors.EVENT_READ, ("exit", pid, conn))
            elif kind == "client":
                _, pid, pidfd = key.data
                conn = key.fileobj
                message = _message(conn)
                if message is None:  # the job's side died (e.g. SIGKILL): so does the job
                    selector.unregister(conn)
                    conn.close()
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                elif "signal" in message:
                    try:
                        os.kill(pid, message["signal"])
                    except ProcessLookupError:
                        pass
            else:
                _, pid, conn = key.data
                selector.unregister(key.fileobj)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                children.discard(pid)
                try:
                    _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
                    selector.unregister(conn)
                except (OSError, KeyError, ValueError):
                    pass
                conn.close()


def run(argv: list[str]) -> None:
    """The job's side (module docstring): ``argv`` is the interpreter's (``-m module args...``)."""
    path = os.environ.get(SERVER_VARIABLE)
    usable = (
        path not in (None, "", OFF)
        and os.path.exists(path)
        and "SLURM_JOB_ID" not in os.environ
        and argv[:1] == ["-m"]
    )
    conn = None
    if usable:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
        except OSError:
            conn = None
    if conn is None:
        os.execv(sys.executable, [sys.executable, *argv])
    request = {"module": argv[1], "args": argv[2:], "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    started = _message(conn)
    if started is None:
        sys.exit("job server: no answer")
    if "plain" in started:  # its import-time environment is not the server's (see differing)
        conn.close()
        os.execv(sys.executable, [sys.executable, *argv])

    def relay(sig: int, _frame: object) -> None:
        _send(conn, {"signal": sig})

    for sig in RELAYED:
        signal.signal(sig, relay)
    die_with_parent()
    while True:
        try:
            message = _message(conn)
        except InterruptedError:
            continue
        if message is None:
            sys.exit("job server: connection lost")
        if "exit" in message:
            code = message["exit"]
            if code < 0:
                signal.signal(-code, signal.SIG_DFL)
                os.kill(os.getpid(), -code)
            sys.exit(code)


def start(log: Path, env: dict[str, str] | None = None) -> subprocess.Popen | None:
    """Start a server for this process's jobs (its socket in a new temporary folder, short enough
    for AF_UNIX), wait until it listens and name it in ``$RERANK_SCALING_JOB_SERVER``; None (jobs
    start as before) when it did not come up within a minute, with the reason in ``log``.

    Why wait: started without waiting (commit c03263f), the first jobs of a fresh default DAG ran as
    plain processes, each importing torch while the server imported it too, three processes on two
    cores: the data jobs took 0.4 min instead of 0.1 and training 13.0 min instead of 11.8 (summed;
    the DAG 11.5 min against 11.0, one quiet fresh-clone run each), more than the ~8 s a re-run of
    one light job saves by not waiting.

    ``env``: variables set for the server on top of this process's environment (the import-time
    environment of the jobs it should serve, :func:`differing`)."""
    folder = tempfile.mkdtemp(prefix="rerank-jobs-")
    path = os.path.join(folder, "socket")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "rerank_scaling.workflow.job_server", "serve", path],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {}), PARENT_VARIABLE: str(os.getpid())},
        )
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if server.poll() is not None or time.monotonic() > deadline:
            stop(server)
            return None
        time.sleep(0.1)
    os.environ[SERVER_VARIABLE] = path
    return server


def stop(server: subprocess.Popen | None, path: str | None = None) -> None:
    """Stop ``server`` (SIGTERM: its running jobs are terminated first) and remove its socket:
    ``path``, else the one ``$RERANK_SCALING_JOB_SERVER`` names (then unset)."""
    path = os.environ.pop(SERVER_VARIABLE, None) if path is None else path
    if server is None:
        return
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if path:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["run"]:
        run(sys.argv[2:])
    else:
        sys.exit("usage: python -m rerank_scaling.workflow.job_server serve SOCKET | run -m MODULE ARGS...")
