"""The paper grid submitted through the SLURM executor plugin's real code, to stand-in SLURM
commands that log their arguments: every sbatch call's partition, ``--gpus``, ``-C``, ``--mem`` and
``-t`` against the workload model (:mod:`rerank_scaling.workflow.job_resources`,
:mod:`rerank_scaling.workflow.cpu_memory`).

The README's cluster step 3 runs as written (its placeholders replaced, and ``gpu_constraint: h100``
added to its ``cluster`` mapping). The stand-in ``sbatch`` logs its arguments, creates the
outputs (and the benchmark file) the dry run lists for the job it is handed (found by the
``--target-jobs`` of the plugin's job command), and answers a job id; ``sacct`` reports every
submitted job COMPLETED; ``sacctmgr``, ``sinfo``, ``scontrol`` and ``squeue`` answer what the
plugin asks of a cluster with the two partitions. So Snakemake submits the whole DAG, wave by
wave, as on a cluster, while no job runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, copy_workflow, dry_run_jobs, readme_block

from rerank_scaling.workflow.cpu_memory import EXAMPLES, MERGE
from rerank_scaling.workflow.job_resources import CPU_MEMORY_MARGIN, JobSizes
from rerank_scaling.workflow.load import load_config
from rerank_scaling.workflow.workload import config_workload

PLUGIN_DIR = REPO / ".venv" / "slurm-extra"  # scripts/install_slurm_test_deps.sh
CLUSTER = {"ACCOUNT": "acct1", "GPU_PARTITION": "gpu-h100", "CPU_PARTITION": "cpu-std"}
CONSTRAINT = "h100"
GPU_RULES = {"train", "evaluate_run", "evaluate_part", "evaluate_bundle", "plan"}

SBATCH = """
import fcntl, json, re, sys
from pathlib import Path
here = Path(__file__).parent
args, script = sys.argv[1:], sys.stdin.read() if "/dev/stdin" in sys.argv else ""
command = " ".join(args) + " " + script
target = re.search(r"--target-jobs\\s+'?([^' ]+)'?", command.replace('\\\\"', '"')).group(1)
rule, _, wildcards = target.partition(":")
key = rule + ":" + ",".join(sorted(filter(None, wildcards.split(","))))
outputs = json.loads((here / "outputs.json").read_text())[key]
for path in outputs:
    path = Path(path)
    if path.name in ("index",):  # the directory() outputs of the rules
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
with open(here / "sbatch.jsonl", "a+") as log:  # the plugin submits from several threads at once
    fcntl.flock(log, fcntl.LOCK_EX)
    log.seek(0)
    job = 1000 + len(log.readlines())
    log.write(json.dumps({"job": job, "key": key, "args": args}) + "\\n")
print(job)
"""

SACCT = """
import json, sys
from pathlib import Path
here = Path(__file__).parent
log = here / "sbatch.jsonl"
jobs = [json.loads(line)["job"] for line in log.read_text().splitlines()] if log.exists() else []
print("\\n".join(f"{job}|COMPLETED" for job in jobs))
"""

ANSWERS = {
    "sacctmgr": 'print("acct1")',
    "sinfo": 'print("gpu-h100\\ncpu-std*")',
    "scontrol": 'print("MinJobAge               = 300 sec")',
    "squeue": "pass",
}


def _stand_ins(bin_dir: Path) -> None:
    bin_dir.mkdir()
    for name, body in {"sbatch": SBATCH, "sacct": SACCT, **ANSWERS}.items():
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}\n")
        path.chmod(0o755)


def _key(rule: str, wildcards: dict[str, str]) -> str:
    return rule + ":" + ",".join(sorted(f"{k}={v}" for k, v in wildcards.items()))


def _outputs(block_output: str) -> list[str]:
    return [path.strip() for path in block_output.split(",") if path.strip()]


def _option(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` in an sbatch call (``-p x``, ``--gpus=1``, ``-C 'x'``)."""
    words = shlex.split(" ".join(args))
    for index, word in enumerate(words):
        if word == flag and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


@pytest.fixture(scope="module")
def submitted(tmp_path_factory) -> dict:
    if not (PLUGIN_DIR / "snakemake_executor_plugin_slurm").is_dir():
        pytest.skip("the SLURM executor plugin is not installed (scripts/install_slurm_test_deps.sh)")
    workdir = tmp_path_factory.mktemp("paper-submission")
    copy_workflow(workdir, "config.paper.yaml", "profiles")
    (workdir / ".venv").symlink_to(REPO / ".venv")
    steps = readme_block("**3. Submit**", CLUSTER)
    steps = steps.replace(
        "cpu_partition: cpu-std}", f"cpu_partition: cpu-std, gpu_constraint: {CONSTRAINT}}}"
    )
    assert CONSTRAINT in steps
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
    }
    bash = ["bash", "-euo", "pipefail", "-c"]
    dry = subprocess.run(
        [*bash, steps.rstrip("\n") + " -n"], capture_output=True, text=True, cwd=workdir, env=env, timeout=600
    )
    assert dry.returncode == 0, (dry.stdout + dry.stderr)[-4000:]
    blocks = re.split(r"\n(?=(?:local)?rule \w+:\n)", dry.stdout + dry.stderr)
    planned = [job for job in dry_run_jobs(dry.stdout + dry.stderr) if job["rule"] != "all"]
    outputs = {}
    for block in blocks:
        head = re.match(r"(?:local)?rule (\w+):\n", block)
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, re.M))
        if head and head.group(1) != "all":
            wildcards = dict(
                item.split("=", 1) for item in fields.get("wildcards", "").split(", ") if "=" in item
            )
            written = _outputs(fields["output"]) + _outputs(fields.get("benchmark", ""))
            outputs[_key(head.group(1), wildcards)] = [str(workdir / p) for p in written]
    bin_dir = workdir / "standin"
    _stand_ins(bin_dir)
    (bin_dir / "outputs.json").write_text(json.dumps(outputs))
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    run = subprocess.run(
        [*bash, steps.rstrip("\n") + " --slurm-init-seconds-before-status-checks 1 --latency-wait 1"],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=1200,
    )
    calls = [json.loads(line) for line in (bin_dir / "sbatch.jsonl").read_text().splitlines()]
    return {"run": run, "planned": planned, "calls": calls}


def test_snakemake_submits_every_planned_job_once_and_finishes(submitted) -> None:
    run, planned, calls = submitted["run"], submitted["planned"], submitted["calls"]
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert sorted(call["key"] for call in calls) == sorted(_key(j["rule"], j["wildcards"]) for j in planned)
    assert len(calls) > 190 and any(call["key"].startswith("evaluate_bundle:") for call in calls)


def test_each_sbatch_call_asks_for_what_the_workload_model_sizes(submitted) -> None:
    """Partition, account, --gpus and -C by the rule; --mem and -t as planned; the data-sized CPU
    jobs and BM25 by their measured models."""
    planned = {_key(j["rule"], j["wildcards"]): j["resources"] for j in submitted["planned"]}
    config = load_config(REPO / "config.paper.yaml")
    sizes = JobSizes.from_config(config, config_workload(config), {})
    by_rule: dict[str, list[dict]] = {}
    for call in submitted["calls"]:
        rule, args = call["key"].split(":")[0], call["args"]
        by_rule.setdefault(rule, []).append(call)
        gpu = rule in GPU_RULES
        assert _option(args, "-p") == CLUSTER["GPU_PARTITION" if gpu else "CPU_PARTITION"], call
        assert _option(args, "-A") == CLUSTER["ACCOUNT"], call
        assert _option(args, "--gpus") == ("1" if gpu else None), call
        assert _option(args, "-C") == (CONSTRAINT if gpu else None), call
        resources = planned[call["key"]]
        assert _option(args, "--mem") == resources["mem_mb"], call
        assert _option(args, "-t") == resources["runtime"], call
    examples = by_rule["training_examples"][0]["args"]
    counts = sizes.examples_counts()
    assert (
        int(_option(examples, "--mem")) == sizes.mem_mb(CPU_MEMORY_MARGIN * EXAMPLES.peak_mb(counts)) > 10_000
    )
    assert int(_option(examples, "-t")) == sizes.margin_minutes(EXAMPLES.seconds(counts))
    merge = by_rule["merge_metrics"][0]["args"]
    merge_counts = sizes.merge_counts(len(by_rule["train"]), config["training"]["checkpoints"])
    assert int(_option(merge, "--mem")) == sizes.mem_mb(CPU_MEMORY_MARGIN * MERGE.peak_mb(merge_counts))
    assert int(_option(by_rule["bm25_index"][0]["args"], "--mem")) == sizes.bm25_mem_mb()
    for call in by_rule["train"]:
        run = call["key"].split("run=")[1]
        assert int(_option(call["args"], "-t")) == sizes.train_runtime(run), call
        assert int(_option(call["args"], "--mem")) == sizes.model_mem_mb("train", run), call
