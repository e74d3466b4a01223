"""The workflow on a real single-node SLURM cluster, through profiles/slurm and `--executor slurm`.

The fixture starts munged, slurmctld and slurmd (Debian's packages, installed by
scripts/install_slurm_test_deps.sh) with a configuration in a temporary directory, and stops them
afterwards, also when a test fails. The node is in two partitions, `cpu` and `gpu` (the default),
and advertises one GPU (a gres whose device file is a fake: enough for scheduling). Without
slurmdbd there is no accounting database, so the plugin is told (by a workflow profile,
`profiles/default` in the checkout) to poll job states with squeue (`slurm-status-command`;
MinJobAge keeps finished jobs visible to it), and `sacct -c` reads where and how each job ran
from the job-completion log (jobcomp/filetxt).

The workflow is submitted by the README's cluster step 3, run verbatim by bash but for its
placeholders (account, partitions) and its config file, as a user on a login node would: from a
checkout with `.venv`, the venv not on PATH and a `python` first on PATH that is not the project's
(it fails loudly if a job calls it). Jobs are routed by the config's `cluster` keys alone. The same
run has its training job cancelled with `scancel` while it runs and retried by the profile, so one
run serves every check but the `device: cuda` one (which needs a config of its own).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, dry_run_jobs, readme_block

pytestmark = pytest.mark.slow

# The plugin lives outside .venv's site-packages (see scripts/install_slurm_test_deps.sh).
PLUGIN_DIR = REPO / ".venv" / "slurm-extra"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo", "sacct")
PARTITIONS = {"cpu": "cpu", "gpu": "gpu"}  # the config's cluster.cpu_partition / gpu_partition
GPU_RULES = ("train", "evaluate_run", "evaluate_part", "plan")
# A guard against a hung run, not a speed target: on 2 shared cores at a load average of ~20 the
# run took over 15 minutes to reach its training job.
RUN_TIMEOUT_S = 1800


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _missing_requirement() -> str | None:
    if os.geteuid() != 0:
        return "the SLURM test starts slurmctld/slurmd/munged and needs root"
    missing = [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name) is None]
    if missing:
        return (
            f"SLURM is not installed (missing {', '.join(missing)}); "
            "run scripts/install_slurm_test_deps.sh (root, Debian apt)"
        )
    if not (PLUGIN_DIR / "snakemake_executor_plugin_slurm").is_dir():
        return f"the SLURM executor plugin is not in {PLUGIN_DIR}; run scripts/install_slurm_test_deps.sh"
    return None


def _slurm_conf(root: Path, host: str) -> str:
    cpus = len(os.sched_getaffinity(0))
    return f"""\
ClusterName=rerank-test
GresTypes=gpu
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
# No systemd and no cgroups in a container: plain process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Trust the node definition below instead of the hardware: the rules ask for more memory than a CI
# box has (memory is not a consumable resource here, so nothing is enforced).
SlurmdParameters=config_overrides
ReturnToService=2
# squeue and scontrol must still list the run's first jobs when the tests read them after the
# run: finished jobs are kept for twice the run's timeout (at 900 s a slow run lost its first jobs)
MinJobAge={2 * RUN_TIMEOUT_S}
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=64000 Gres=gpu:1 State=UNKNOWN
# The GPU partition is the default: a CPU job the workflow did not route would land there.
PartitionName={PARTITIONS["cpu"]} Nodes={host} MaxTime=INFINITE State=UP
PartitionName={PARTITIONS["gpu"]} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _gres_conf(root: Path, host: str) -> str:
    """One GPU whose device file is a plain file: slurmd only checks that it exists."""
    device = root / "fake-nvidia0"
    device.touch()
    return f"NodeName={host} Name=gpu File={device}\n"


class SlurmCluster:
    """munged + slurmctld + slurmd in the foreground, each in its own process group."""

    def __init__(self, root: Path):
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.bin = root / "bin"
        self.processes: list[subprocess.Popen] = []

    @property
    def env(self) -> dict[str, str]:
        """A login shell's environment: the venv not on PATH (the project's `python` is not found there)."""
        env = dict(os.environ, SLURM_CONF=str(self.conf))
        venv = {str(Path(sys.executable).parent), str(REPO / ".venv" / "bin")}
        path = [entry for entry in env["PATH"].split(os.pathsep) if entry not in venv]
        env["PATH"] = os.pathsep.join([str(self.bin), *path])
        env.pop("VIRTUAL_ENV", None)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), env.get("PYTHONPATH")]))
        return env

    def start(self) -> None:
        for sub in ("state", "spool", "log", "munge", "bin"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        munge = self.root / "munge"
        munge.chmod(0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(_slurm_conf(self.root, self.host))
        (self.root / "gres.conf").write_text(_gres_conf(self.root, self.host))
        # a `python` that is not the project's, first on PATH: a job that calls it fails, naming it
        (self.root / "bin" / "python").write_text("#!/bin/sh\necho 'not the project python' >&2\nexit 97\n")
        (self.root / "bin" / "python").chmod(0o755)
        # The jobstep plugin drops every SLURM_* variable (SLURM_CONF included) before its nested
        # srun, and so does each job's Snakemake before it calls scontrol. A real cluster keeps its
        # configuration where clients find it by default; this one lives in a temporary directory,
        # so the client commands on PATH are shims that point them to it.
        for name in CLIENTS:
            shim = self.bin / name
            shim.write_text(f'#!/bin/sh\nexport SLURM_CONF={self.conf}\nexec {shutil.which(name)} "$@"\n')
            shim.chmod(0o755)
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={munge}/munge.socket",
                f"--pid-file={munge}/munged.pid",
                f"--log-file={munge}/munged.log",
                f"--seed-file={munge}/seed",
            ],
        )
        self._wait_for(lambda: (munge / "munge.socket").exists(), "munged to open its socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait_for(lambda: self.client("scontrol", "ping").returncode == 0, "slurmctld to answer")
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.host])
        self._wait_for(
            lambda: set(self.client("sinfo", "-h", "-o", "%T").stdout.split()) == {"idle"},
            "the node to be idle",
        )

    def _spawn(self, name: str, command: list[str]) -> None:
        with open(self.root / "log" / f"{name}.out", "w") as log:
            process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes.append(process)

    def _wait_for(self, ready, what: str, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited ({process.returncode}):\n{self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise TimeoutError(f"timed out waiting for {what}:\n{self.logs()}")

    def client(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld still knows (finished ones for MinJobAge seconds)."""
        fields = {
            "id": "%i",
            "state": "%T",
            "name": "%j",
            "comment": "%k",
            "memory": "%m",
            "time_limit": "%l",
            "gres": "%b",
        }
        result = self.client("squeue", "--states=all", "--noheader", "--format", "|".join(fields.values()))
        assert result.returncode == 0, result.stderr
        return [dict(zip(fields, line.split("|"), strict=True)) for line in result.stdout.splitlines()]

    def completed(self) -> dict[str, dict[str, str]]:
        """Job id -> partition, account, state and time limit (minutes), from `sacct -c` (the
        job-completion log: every job that ended, however it ended; it keeps no memory or TRES)."""
        fields = ("JobID", "Partition", "Account", "State", "TimelimitRaw")
        result = self.client("sacct", "-c", "--noheader", "--parsable2", "--format", ",".join(fields))
        assert result.returncode == 0, result.stderr
        rows = [dict(zip(fields, line.split("|"), strict=True)) for line in result.stdout.splitlines()]
        return {row["JobID"]: row for row in rows}

    def details(self, job_id: str) -> dict[str, str]:
        """`scontrol show job`'s fields of a job slurmctld still knows (MinJobAge): the memory it
        asked for (MinMemoryNode) and its trackable resources (TRES, e.g. gres/gpu=1)."""
        result = self.client("scontrol", "show", "job", "--oneliner", job_id)
        assert result.returncode == 0, result.stderr
        return dict(item.split("=", 1) for item in result.stdout.split() if "=" in item)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}"
            for path in sorted((self.root / "log").glob("*")) + [self.root / "munge" / "munged.log"]
            if path.exists()
        )

    def stop(self) -> None:
        # cancel whatever a failed test left queued or running, before slurmd goes
        try:
            active = [
                job["id"]
                for job in self.jobs()
                if job["state"] not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
            ]
        except (AssertionError, OSError, subprocess.SubprocessError):
            active = []
        if active:
            self.client("scancel", *active)
            time.sleep(2)
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
        self.processes.clear()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> SlurmCluster:
    reason = _missing_requirement()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


# What the README's step 3 placeholders become on this cluster; its config file becomes the test's.
README_VALUES = {
    "config.paper.yaml": "slurm.yaml",
    "ACCOUNT": "rerank",
    "GPU_PARTITION": PARTITIONS["gpu"],
    "CPU_PARTITION": PARTITIONS["cpu"],
}
# This test cluster has no accounting database (slurmdbd): only squeue knows job states. A workflow
# profile (profiles/default, which Snakemake reads besides --profile) says so, so that the README's
# command runs as written.
TEST_CLUSTER_PROFILE = {
    "slurm-status-command": "squeue",
    "slurm-init-seconds-before-status-checks": 1,
    "seconds-between-status-checks": 1,
    "slurm-keep-successful-logs": True,
}


def readme_submit_steps() -> str:
    """The README's cluster step 3 ("**3. Submit**"), placeholders replaced by README_VALUES."""
    script = readme_block("**3. Submit**", README_VALUES)
    assert ".venv/bin/snakemake" in script and "--profile profiles/slurm" in script, script
    return script


def slurm_command(*args: str) -> list[str]:
    """The command of the README's step 3 (after its cluster.yaml is written), plus ``args``."""
    return [
        ".venv/bin/snakemake",
        "--configfile",
        "slurm.yaml",
        "cluster.yaml",
        "--profile",
        "profiles/slurm",
        *args,
    ]


def snakemake_on_slurm(cluster: SlurmCluster, workdir: Path, *args: str, configfile: str = "slurm.yaml"):
    command = slurm_command(*args)
    command[2] = configfile
    return subprocess.run(
        command, env=cluster.env, capture_output=True, text=True, cwd=workdir, timeout=RUN_TIMEOUT_S
    )


def job_counts(output: str) -> Counter:
    """Rule -> jobs, from the 'Job stats' table Snakemake prints before it runs."""
    table = re.search(r"job\s+count\n-+\s+-+\n(.*?)\ntotal", output, re.S)
    assert table, output[-3000:]
    rows = (line.split() for line in table.group(1).splitlines())
    counts = Counter({name: int(count) for name, count in rows})
    counts.pop("all", None)  # a target-only rule, run by Snakemake itself
    return counts


TRAIN_RUN = "L1__pointwise__full__s13"  # the config's one training run


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory) -> dict:
    """The README's step 3, verbatim but for its placeholders and config file, run from a checkout
    (the workflow, profiles/slurm, .venv) in a login shell's environment (cluster.env: the venv not
    on PATH, a failing `python` first there) on the test cluster, with tests/configs/slurm.yaml.

    The run's one `train` job is held by the trainer's test hook after its first checkpoint (step
    2 of 4) and cancelled there with `scancel`: the profile's retry resumes it, and every other job
    runs once. One run serves the partition checks and the cancel-and-retry check (a second run
    of its own cost two more training jobs and a Snakemake start-up)."""
    workdir = tmp_path_factory.mktemp("slurm-workflow")
    copy_workflow(workdir)
    shutil.copytree(REPO / "profiles" / "slurm", workdir / "profiles" / "slurm")
    (workdir / "profiles" / "default").mkdir()
    (workdir / "profiles" / "default" / "config.yaml").write_text(yaml.safe_dump(TEST_CLUSTER_PROFILE))
    (workdir / ".venv").symlink_to(REPO / ".venv")
    shutil.copy(REPO / "tests" / "configs" / "slurm.yaml", workdir / "slurm.yaml")
    steps = readme_submit_steps()
    planned = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", steps.rstrip("\n") + " -n"],
        env=cluster.env,
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=RUN_TIMEOUT_S,
    )
    assert planned.returncode == 0, (planned.stdout + planned.stderr)[-4000:]
    log = workdir / "results" / "slurm" / "logs" / "train" / f"{TRAIN_RUN}.log"
    transcript = tmp_path_factory.mktemp("slurm-transcript") / "snakemake.out"
    env = {**cluster.env, "RERANK_SCALING_FAULT": "published:1:hold"}
    with open(transcript, "w") as out:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", steps],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
        try:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while "hold at published 1" not in (log.read_text() if log.exists() else ""):
                assert process.poll() is None, transcript.read_text()[-4000:] + "\n" + cluster.logs()
                assert time.monotonic() < deadline, "the train job never reached its first checkpoint"
                time.sleep(0.5)
            (held,) = [job for job in cluster.jobs() if job["comment"].startswith("rule_train_")]
            assert cluster.client("scancel", held["id"]).returncode == 0
            process.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if process.poll() is None:
                process.kill()
    output = transcript.read_text()
    assert process.returncode == 0, output[-6000:] + "\n" + cluster.logs()
    return {
        "workdir": workdir,
        "output": output,
        "planned": dry_run_jobs(planned.stdout + planned.stderr),
        "held": held,  # the train job as squeue listed it when scancel was sent
        "jobs": cluster.jobs(),  # every job of this run (before the other tests add theirs)
    }


def megabytes(text: str) -> int:
    """SLURM's memory as it prints it (1111M, 1.50G) in MB."""
    scale = {"M": 1, "G": 1024, "T": 1024**2}[text[-1]]
    return round(float(text[:-1]) * scale)


def job_key(comment: str) -> str:
    """The plugin's job comment, rule_<rule>[_wildcards_<values joined by _>], as <rule>:<values>."""
    rule, _, values = comment.removeprefix("rule_").partition("_wildcards_")
    return f"{rule}:{values}"


def test_the_workflow_completes_with_every_job_run_by_slurm(cluster, slurm_run):
    workdir = slurm_run["workdir"]
    results = workdir / "results" / "slurm"
    for target in ("metrics/all.parquet", "laws/fits.parquet", "summary.md"):
        assert (results / target).stat().st_size > 0, target
    assert (results / "summary.md").read_text().startswith("# rerank-scaling summary")

    expected = job_counts(slurm_run["output"])
    assert {"prepare_data", "train", "evaluate_run", "fit_laws", "report_figures"} <= set(expected)
    jobs = slurm_run["jobs"]
    # one Snakemake run: its jobs share the run's SLURM job name; the comment names the rule
    assert len({job["name"] for job in jobs}) == 1, jobs
    # the one job scancel'ed (its retry is another SLURM job); every other job ran once
    cancelled = [job for job in jobs if job["id"] == slurm_run["held"]["id"]]
    assert [job["state"] for job in cancelled] == ["CANCELLED"], jobs
    once = [job for job in jobs if job not in cancelled]
    ran = Counter(re.sub(r"^rule_", "", job["comment"]).split("_wildcards_")[0] for job in once)
    assert ran == expected, f"SLURM ran {ran}, Snakemake planned {expected}"
    assert {job["state"] for job in once} == {"COMPLETED"}, jobs
    # each job's log is where the plugin puts it, named by its SLURM job id
    logs = {path.stem for path in (workdir / ".snakemake" / "slurm_logs").rglob("*.log")}
    assert logs == {job["id"] for job in jobs}


def test_every_job_landed_on_its_partition_with_the_limits_snakemake_planned(cluster, slurm_run):
    """sacct (the job-completion log): model rules on the GPU partition, the rest on the CPU one,
    under the README's account, each with the time limit of Snakemake's own dry run (twice it for the
    retry of the cancelled job: a second attempt); scontrol: the memory it planned (more for the
    retry), and no GPU
    under device: cpu. No --set-resources was given."""
    planned = {
        f"{job['rule']}:{'_'.join(job['wildcards'].values())}": job["resources"]
        for job in slurm_run["planned"]
        if job["rule"] != "all"
    }
    completed = cluster.completed()
    jobs = slurm_run["jobs"]
    held = slurm_run["held"]
    assert {job_key(job["comment"]) for job in jobs} == set(planned)
    assert {job_key(job["comment"]).split(":")[0] for job in jobs} & set(GPU_RULES), jobs
    for job in jobs:
        resources, done, details = (
            planned[job_key(job["comment"])],
            completed[job["id"]],
            cluster.details(job["id"]),
        )
        rule = job_key(job["comment"]).split(":")[0]
        retry = job["comment"] == held["comment"] and job["id"] != held["id"]
        assert done["Partition"] == PARTITIONS["gpu" if rule in GPU_RULES else "cpu"], (rule, done)
        assert resources["slurm_partition"] == done["Partition"], (rule, resources)
        assert done["Account"] == README_VALUES["ACCOUNT"], (rule, done)
        assert done["State"] == ("CANCELLED" if job["id"] == held["id"] else "COMPLETED"), (rule, done)
        # the retry is a second attempt: its time limit is twice the first's (job_resources)
        assert int(done["TimelimitRaw"]) == int(resources["runtime"]) * (2 if retry else 1), (rule, done)
        memory = megabytes(details["MinMemoryNode"])
        if retry:
            assert memory > int(resources["mem_mb"]), (rule, details, resources)
        else:
            assert memory == int(resources["mem_mb"]), (rule, details, resources)
        assert "gres/gpu" not in details["TRES"], (rule, details)  # device: cpu asks for no GPU


def test_a_cuda_config_trains_on_the_gpu_partition_with_one_gpu(cluster, slurm_run, tmp_path):
    """device: cuda: SLURM gives the train job the GPU partition's (fake) GPU; torch finds no real
    one there, and the job's error says which CUDA torch was built for and which driver is there."""
    # A copy of the finished run, so that only `train` is out of date.
    workdir = tmp_path / "cuda"
    shutil.copytree(slurm_run["workdir"], workdir, symlinks=True)
    config = yaml.safe_load((workdir / "slurm.yaml").read_text())
    config["device"] = "cuda"
    (workdir / "slurm-cuda.yaml").write_text(yaml.safe_dump(config))
    before = {job["id"] for job in cluster.jobs()}
    result = snakemake_on_slurm(
        cluster, workdir, "--until", "train", "--retries", "0", configfile="slurm-cuda.yaml"
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    (train,) = [job for job in cluster.jobs() if job["id"] not in before]
    assert train["comment"].startswith("rule_train_"), train
    done = cluster.completed()[train["id"]]
    assert done["Partition"] == PARTITIONS["gpu"] and done["State"] == "FAILED", done
    held = cluster.details(train["id"])
    asked = " ".join(held.get(field, "") for field in ("TRES", "TresPerJob", "TresPerNode"))
    assert re.search(r"gres[/:]gpu[:=]1", asked), held  # 22.05: TresPerJob=gres:gpu:1
    log = (workdir / "results" / "slurm" / "logs" / "train" / "L1__pointwise__full__s13.log").read_text()
    assert "no GPU is visible" in log and "torch.version.cuda" in log and "driver" in log, log[-2000:]


def test_a_cancelled_training_job_is_retried_and_resumes_from_the_state_saved_on_sigterm(slurm_run):
    """scancel a running `train` job (slurm_run: held after its first checkpoint): the trainer saves
    its state on SLURM's SIGTERM, the profile's retry resumes the job from that state instead of
    starting over, and the workflow goes on to the end."""
    held = slurm_run["held"]
    assert held["state"] == "RUNNING" and held["comment"].startswith("rule_train_"), held
    train = sorted(
        (job for job in slurm_run["jobs"] if job["comment"].startswith("rule_train_")),
        key=lambda job: int(job["id"]),
    )
    assert [(job["id"], job["state"]) for job in train] == [
        (held["id"], "CANCELLED"),
        (train[-1]["id"], "COMPLETED"),
    ]
    results = slurm_run["workdir"] / "results" / "slurm"
    log = (results / "logs" / "train" / f"{TRAIN_RUN}.log").read_text()
    # the retry's log: it resumed from the state saved on SIGTERM at step 3, after checkpoint 1
    assert re.search(r"resuming from \S+checkpoint-3 \(step 3\)", log), log[-3000:]
    steps = [
        yaml.safe_load(path.read_text())["step"]
        for path in sorted((results / "checkpoints" / TRAIN_RUN).glob("ckpt-*/checkpoint.json"))
    ]
    assert steps == [2, 4]
