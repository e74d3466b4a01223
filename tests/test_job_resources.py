"""What each job of the paper grid asks SLURM for, read from Snakemake's own dry run of the README's
cluster step 3 (run by bash as written, its placeholders replaced, `-n` added): config.paper.yaml
through the SLURM profile with only the config's documented `cluster` keys (account, GPU and CPU
partitions) and no --set-resources / --default-resources on the command line."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import os
import subprocess
from collections import defaultdict

import pytest
from conftest import REPO, copy_workflow, dry_run_jobs, readme_block

from rerank_scaling.workflow.cpu_memory import CPU_COSTS, CPU_MODELS, EXAMPLES, MERGE
from rerank_scaling.workflow.eval_bundles import EVAL_SETUP, evaluation_bundles, setup_share
from rerank_scaling.workflow.job_resources import (
    BM25_FALLBACK_MINUTES,
    BM25_RATES,
    CPU_MEMORY_MARGIN,
    JVM_NATIVE_MB,
    MODEL_PRIORITY_CEILING,
    ClusterSettings,
    JobSizes,
    longest_first,
    resources_for,
)
from rerank_scaling.workflow.load import load_config
from rerank_scaling.workflow.workload import Workload, config_workload

PLUGIN_DIR = REPO / ".venv" / "slurm-extra"  # scripts/install_slurm_test_deps.sh
CLUSTER = {"account": "acct1", "gpu_partition": "gpu-h100", "cpu_partition": "cpu-std"}
GPU_RULES = {"train", "evaluate_run", "evaluate_part", "evaluate_bundle", "plan"}
SIZES = ["ettin-17m", "ettin-32m", "ettin-68m", "ettin-150m", "ettin-400m", "ettin-1b"]


def _plugin_missing() -> bool:
    found = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None
    return not found and not (PLUGIN_DIR / "snakemake_executor_plugin_slurm").is_dir()


@pytest.fixture(scope="module")
def paper_jobs(tmp_path_factory) -> list[dict]:
    if _plugin_missing():
        pytest.skip("the SLURM executor plugin is not installed (scripts/install_slurm_test_deps.sh)")
    workdir = tmp_path_factory.mktemp("paper-dry-run")
    copy_workflow(workdir, "config.paper.yaml", "profiles")
    (workdir / ".venv").symlink_to(REPO / ".venv")
    placeholders = {"ACCOUNT": "account", "GPU_PARTITION": "gpu_partition", "CPU_PARTITION": "cpu_partition"}
    steps = readme_block("**3. Submit**", {name: CLUSTER[key] for name, key in placeholders.items()})
    command = ["bash", "-euo", "pipefail", "-c", steps.rstrip("\n") + " -n"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
    }
    result = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    jobs = [job for job in dry_run_jobs(output) if job["rule"] != "all"]
    assert len(jobs) > 190, output[-3000:]  # the small models' evaluation bundled (eval_bundles)
    return jobs


def test_every_model_rule_goes_to_the_gpu_partition_and_the_rest_to_the_cpu_partition(paper_jobs):
    rules = {job["rule"] for job in paper_jobs}
    assert GPU_RULES - {"evaluate_run"} <= rules  # evaluation.unit checkpoint: evaluate_part jobs
    for job in paper_jobs:
        resources, gpu_rule = job["resources"], job["rule"] in GPU_RULES
        where = CLUSTER["gpu_partition"] if gpu_rule else CLUSTER["cpu_partition"]
        assert resources.get("slurm_partition") == where, job
        assert resources.get("slurm_account") == CLUSTER["account"], job
        assert resources.get("gpu") == ("1" if gpu_rule else "0"), job
        assert int(resources["mem_mb"]) >= 1000 and 10 <= int(resources["runtime"]) <= 2880, job
    # the SIGTERM notice travels with the rule, not with a profile block a --set-resources would drop
    assert all(
        "--signal=TERM@120" in job["resources"]["slurm_extra"] for job in paper_jobs if job["rule"] == "train"
    )


def test_time_and_memory_of_model_jobs_are_sized_per_model(paper_jobs):
    scored_by_parts = {
        job["wildcards"]["run"].split("__")[0] for job in paper_jobs if job["rule"] == "evaluate_part"
    }
    expected = {"train": SIZES, "evaluate_part": [size for size in SIZES if size in scored_by_parts]}
    assert "ettin-1b" in expected["evaluate_part"]  # large models keep one job per checkpoint
    by_model: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for job in paper_jobs:
        if job["rule"] in ("train", "evaluate_part"):
            model, objective = job["wildcards"]["run"].split("__")[:2]
            key = f"{job['rule']}:{objective}"
            by_model[key][model].add((int(job["resources"]["runtime"]), int(job["resources"]["mem_mb"])))
    for key, models in by_model.items():
        names = expected[key.split(":")[0]]
        assert sorted(models, key=SIZES.index) == names, key
        # one size per (rule, objective, model), growing with the model
        sizes = [models[name] for name in names]
        assert all(len(s) == 1 for s in sizes), (key, sizes)
        runtimes = [next(iter(s))[0] for s in sizes]
        memory = [next(iter(s))[1] for s in sizes]
        growth = 3 if len(names) == len(SIZES) else 1  # 17M to 1B; the per-checkpoint jobs: 400M to 1B
        assert runtimes == sorted(runtimes) and runtimes[-1] > growth * runtimes[0], (key, runtimes)
        assert memory == sorted(memory) and memory[-1] > memory[0], (key, memory)
    # the README's "at most 15 minutes" evaluation job gets a limit near it, not 12 hours
    part_1b = next(iter(by_model["evaluate_part:pointwise"]["ettin-1b"]))[0]
    assert 30 <= part_1b <= 120, part_1b
    train_17m = next(iter(by_model["train:pointwise"]["ettin-17m"]))[0]
    assert train_17m <= 60, train_17m


def test_longest_first_ranks_costs_equal_costs_alike_and_unknown_last():
    priorities = longest_first({"a": 5e12, "b": 1e9, "c": 5e12, "d": None, "e": 2e15})
    assert priorities == {
        "a": 1 + round((MODEL_PRIORITY_CEILING - 1) / 2),
        "b": 1,
        "c": priorities["a"],
        "d": 0,
        "e": MODEL_PRIORITY_CEILING,
    }
    assert longest_first({"x": None}) == {"x": 0} and longest_first({"x": 3.0}) == {"x": 1}


def test_model_jobs_start_costliest_first_and_after_the_data_checks(paper_jobs):
    """Snakemake runs ready jobs by priority: a larger model's training and evaluation before a
    smaller one's (longest_first), all below the data checks' 50 (rules/data.smk)."""
    model_jobs = [job for job in paper_jobs if job["rule"] in GPU_RULES - {"plan"}]
    assert model_jobs and all(1 <= job["priority"] <= MODEL_PRIORITY_CEILING for job in model_jobs)
    train = {}
    for job in model_jobs:
        if job["rule"] == "train":
            model = job["wildcards"]["run"].split("__")[0]
            train.setdefault(model, set()).add(job["priority"])
    ordered = [train[size] for size in SIZES]
    assert all(max(smaller) < min(larger) for smaller, larger in itertools.pairwise(ordered)), train
    assert max(job["priority"] for job in model_jobs) == MODEL_PRIORITY_CEILING
    checks = [job for job in paper_jobs if job["rule"] in ("prepare_qrels", "check_splits")]
    assert checks and all(job["priority"] == 50 for job in checks)


def test_cpu_rules_keep_their_declared_sizes(paper_jobs):
    # the rules that declared nothing before (the profile's set-resources gave them their limits)
    declared = {job["rule"]: job["resources"] for job in paper_jobs}
    for rule in ("prepare_data", "merge_metrics", "prepare_corpus", "bm25_index"):
        assert int(declared[rule]["mem_mb"]) >= 1000 and int(declared[rule]["runtime"]) >= 10, declared[rule]
    assert int(declared["prepare_data"]["mem_mb"]) == 1000  # a fixed size, not a data-sized one


def test_bm25_jobs_are_sized_from_the_collection_and_each_splits_queries(paper_jobs):
    """MS MARCO's 8.8M passages and each split's queries (ir_datasets' metadata, the train split
    capped at dataset.ir_datasets.max_queries) at the measured rates, not a fixed 60 minutes."""
    config = load_config(REPO / "config.paper.yaml")
    workload = config_workload(config)
    assert workload.documents == 8_841_823 and workload.split_queries["train"] == 200_000
    retrieval, cluster = config["retrieval"], ClusterSettings.of()  # the config's cluster: its defaults
    jobs = {(job["rule"], job["wildcards"].get("split")): job["resources"] for job in paper_jobs}

    def minutes(seconds: float) -> int:
        work = (BM25_RATES.jvm_start_seconds + seconds) / 60
        limit = math.ceil(cluster.runtime_margin * work + cluster.startup_minutes)
        return min(max(limit, cluster.min_runtime), cluster.max_runtime)

    lucene = BM25_RATES.lucene_thread_seconds_per_doc / retrieval["threads"]
    per_doc = BM25_RATES.python_seconds_per_doc + lucene
    assert int(jobs["bm25_index", None]["runtime"]) == minutes(workload.documents * per_doc)
    searched = {split for rule, split in jobs if rule == "bm25_search"}
    assert searched == {"train", "dev", "dl19", "dl20", "dlhard"}
    rate = BM25_RATES.search_thread_seconds_per_query_per_million_docs / retrieval["threads"]
    for split in searched:
        expected = minutes(workload.split_queries[split] * workload.documents / 1e6 * rate)
        assert int(jobs["bm25_search", split]["runtime"]) == expected, split
    assert int(jobs["bm25_search", "train"]["runtime"]) > int(jobs["bm25_search", "dl19"]["runtime"])
    # the heap, the JVM's own memory and the index's mapped pages
    index_mb = workload.documents * BM25_RATES.index_bytes_per_doc / 1e6
    for key, resources in jobs.items():
        if key[0].startswith("bm25_"):
            assert int(resources["mem_mb"]) == math.ceil(retrieval["memory_mb"] + JVM_NATIVE_MB + index_mb)
            assert resources["slurm_partition"] == CLUSTER["cpu_partition"]


def test_bm25_limits_grow_with_the_collection_and_stop_at_the_cap():
    """The same config on collections of growing size: longer index and search limits, up to
    cluster.max_runtime; a collection of unknown size keeps the fallback."""
    config = load_config(REPO / "config.paper.yaml")

    def sizes(documents: int | None, queries: int) -> JobSizes:
        workload = Workload(None, {}, documents, {"train": queries})
        return JobSizes(config, ClusterSettings.of(max_runtime=600), workload, {}, {})

    small, large, huge = sizes(10**6, 10**4), sizes(10**7, 10**5), sizes(10**10, 10**7)
    assert small.bm25_index_runtime() < large.bm25_index_runtime() < huge.bm25_index_runtime() == 600
    assert small.bm25_search_runtime("train") < large.bm25_search_runtime("train")
    assert huge.bm25_search_runtime("train") == 600
    assert small.bm25_mem_mb() < large.bm25_mem_mb() < huge.bm25_mem_mb()
    unknown = sizes(None, 10**4)
    assert unknown.bm25_index_runtime() == unknown.bm25_search_runtime("train") == BM25_FALLBACK_MINUTES
    assert small.bm25_search_runtime("a split with no count") == BM25_FALLBACK_MINUTES


def test_bm25_rates_are_the_measured_ones():
    """BM25_RATES holds the numbers of benchmarks/results/bm25_cpu.md (its JSON block)."""
    text = (REPO / "benchmarks" / "results" / "bm25_cpu.md").read_text()
    measured = json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])
    for name, value in vars(BM25_RATES).items():
        assert value == measured[name], name


def test_cpu_jobs_that_grow_with_the_data_are_sized_by_the_measured_model(paper_jobs):
    """training_examples and merge_metrics: the cpu_memory model of the paper's data, with its
    margin, not a fixed 4000 MB (about 11 GB measured for training_examples at full size)."""
    config = load_config(REPO / "config.paper.yaml")
    sizes = JobSizes.from_config(config, config_workload(config), {})
    declared = {job["rule"]: job["resources"] for job in paper_jobs}
    counts = sizes.examples_counts()
    assert counts is not None and counts.queries == 200_000 and counts.passages == 8_841_823
    examples_mb = math.ceil(CPU_MEMORY_MARGIN * EXAMPLES.peak_mb(counts))
    assert int(declared["training_examples"]["mem_mb"]) == examples_mb > 10_000
    runs = len({job["wildcards"]["run"] for job in paper_jobs if job["rule"] == "train"})
    merge = sizes.merge_counts(runs, config["training"]["checkpoints"])
    assert merge is not None and merge.largest_file_rows == 7127 * 16  # a checkpoint's 4 splits x 16 metrics
    merge_mb = max(math.ceil(CPU_MEMORY_MARGIN * MERGE.peak_mb(merge)), 1000)
    assert int(declared["merge_metrics"]["mem_mb"]) == merge_mb
    for rule, seconds in (
        ("training_examples", EXAMPLES.seconds(counts)),
        ("merge_metrics", MERGE.seconds(merge)),
    ):
        assert int(declared[rule]["runtime"]) == sizes.margin_minutes(seconds), rule


def test_merge_memory_does_not_grow_with_the_grid_and_examples_memory_grows_with_the_data():
    config = load_config(REPO / "config.paper.yaml")
    workload = config_workload(config)
    sizes = JobSizes.from_config(config, workload, {})
    small, large = sizes.merge_counts(18, 20), sizes.merge_counts(180, 20)
    assert MERGE.peak_mb(small) == MERGE.peak_mb(large) and MERGE.seconds(small) < MERGE.seconds(large)
    half = JobSizes.from_config(
        config,
        Workload(
            workload.train_positives // 2, workload.eval_queries, workload.documents // 2, {"train": 100_000}
        ),
        {},
    )
    assert EXAMPLES.peak_mb(half.examples_counts()) < EXAMPLES.peak_mb(sizes.examples_counts())
    unknown = JobSizes.from_config(config, Workload(None), {})
    assert unknown.examples_counts() is None and unknown.merge_counts(18, 20) is None
    assert unknown.cpu_job("training_examples", None) == {"mem_mb": 4000, "runtime": 60}


def test_the_other_data_sized_cpu_jobs_are_sized_from_their_workload(paper_jobs):
    """annotation_examples, prepare_corpus, prepare_qrels, split_texts (per split) and evaluate_bm25
    on the paper's data: each job's declared memory and time are its measured model's, with the
    margin (rerank_scaling.workflow.cpu_memory.CPU_COSTS), and a larger split's texts job asks for more."""
    config = load_config(REPO / "config.paper.yaml")
    sizes = JobSizes.from_config(config, config_workload(config), {})
    seen = defaultdict(dict)
    for job in paper_jobs:
        if job["rule"] in CPU_COSTS:
            seen[job["rule"]][job["wildcards"].get("split", "")] = job["resources"]
    assert set(seen) >= {"prepare_corpus", "prepare_qrels", "split_texts", "evaluate_bm25"}, sorted(seen)
    for rule, jobs in seen.items():
        for split, declared in jobs.items():
            counts = sizes.split_texts_counts(split) if rule == "split_texts" else sizes.data_counts(rule)
            assert counts is not None, rule
            model = CPU_MODELS[rule]
            assert int(declared["mem_mb"]) == sizes.mem_mb(CPU_MEMORY_MARGIN * model.peak_mb(counts)), rule
            assert int(declared["runtime"]) == sizes.margin_minutes(model.seconds(counts)), rule
    texts = {split: int(r["mem_mb"]) for split, r in seen["split_texts"].items()}
    assert texts["dev"] > texts["dl19"], texts  # 6,980 queries' candidates against 43
    unknown = JobSizes.from_config(config, Workload(None), {})
    by_split = unknown.cpu_job_by_wildcard("split_texts", unknown.split_texts_counts)
    assert by_split["mem_mb"](dataclasses.make_dataclass("W", ["split"])("dev"), 2) == 8000


def test_every_rules_time_and_memory_grow_with_the_attempt():
    """Each rule's resources are functions of the attempt: a retry after an out-of-memory kill or a
    time limit asks for more, up to the cluster's caps."""
    config = load_config(REPO / "config.paper.yaml")
    sizes = JobSizes.from_config(config, config_workload(config), {})
    fixed = resources_for(sizes, "prepare_data", mem_mb=1000, runtime=10)
    sized = resources_for(
        sizes, "training_examples", **sizes.cpu_job("training_examples", sizes.examples_counts())
    )
    for resources in (fixed, sized):
        for key in ("mem_mb", "runtime"):
            first, second = resources[key](None, 1), resources[key](None, 2)
            assert second == 2 * first, (key, first, second)
    assert fixed["mem_mb"](None, 1) == 1000 and fixed["runtime"](None, 3) == 30
    caps = {**config["cluster"], "max_mem_mb": 1500, "max_runtime": 15}
    capped = JobSizes.from_config({**config, "cluster": caps}, Workload(None), {})
    assert resources_for(capped, "plan", mem_mb=1000)["mem_mb"](None, 2) == 1500
    assert capped.train_runtime("ettin-17m__pointwise__full__s42", 2) <= 15


def test_cpu_memory_coefficients_are_the_measured_ones():
    """cpu_memory.EXAMPLES, MERGE and CPU_COSTS hold the numbers of benchmarks/results/cpu_memory.md."""
    text = (REPO / "benchmarks" / "results" / "cpu_memory.md").read_text()
    measured = json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])
    assert dataclasses.asdict(EXAMPLES) == measured["examples"]
    assert dataclasses.asdict(MERGE) == measured["merge"]
    assert {rule: dataclasses.asdict(cost) for rule, cost in CPU_COSTS.items()} == measured["costs"]
    assert "**off**" not in text  # every held-out check within the tolerance


def test_gpu_jobs_carry_the_gpu_constraint_and_cpu_jobs_do_not():
    config = load_config(REPO / "config.paper.yaml")
    cluster = ClusterSettings.of(gpu_constraint="h100|h200")
    sizes = JobSizes(config, cluster, Workload(None), {}, {})
    assert sizes.placement("train")["constraint"] == "h100|h200"
    assert sizes.placement("evaluate_part")["constraint"] == "h100|h200"
    assert "constraint" not in sizes.placement("training_examples")
    on_cpu = JobSizes({**config, "device": "cpu"}, cluster, Workload(None), {}, {})
    assert "constraint" not in on_cpu.placement("train")
    assert "constraint" not in JobSizes(config, ClusterSettings.of(), Workload(None), {}, {}).placement(
        "train"
    )


def test_eval_setup_is_the_measured_one():
    """eval_bundles.EVAL_SETUP holds the numbers of benchmarks/results/eval_job_setup.md."""
    text = (REPO / "benchmarks" / "results" / "eval_job_setup.md").read_text()
    measured = json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])
    assert dataclasses.asdict(EVAL_SETUP) == measured


def test_every_evaluation_job_of_the_paper_grid_spends_at_most_a_tenth_on_setup(paper_jobs):
    """By the cost model and the set-up measured on a CPU: the runs whose per-checkpoint jobs would
    mostly pay set-up (the smallest models) are scored whole, several a job (evaluate_bundle); every
    evaluation job, bundled or not, spends at most cluster.max_setup_share (0.1) on set-up."""
    config = load_config(REPO / "config.paper.yaml")
    sizes = JobSizes.from_config(config, config_workload(config), {})
    runs = sorted({job["wildcards"]["run"] for job in paper_jobs if job["rule"] == "train"})
    checkpoints = config["training"]["checkpoints"]
    bundles = evaluation_bundles(sizes, runs, checkpoints)
    bundled = {run for bundle in bundles for run in bundle}
    jobs = [job for job in paper_jobs if job["rule"] in ("evaluate_bundle", "evaluate_part")]
    assert sum(job["rule"] == "evaluate_bundle" for job in jobs) == len(bundles) > 0
    parts = {job["wildcards"]["run"] for job in jobs if job["rule"] == "evaluate_part"}
    assert parts | bundled == set(runs) and not parts & bundled  # every run scored once
    assert {run for run in runs if run.startswith("ettin-17m")} <= bundled
    assert setup_share(sizes, [runs[0]], 1) > 0.1  # a per-checkpoint job of a small model would not be
    shares = [setup_share(sizes, bundle, checkpoints) for bundle in bundles]
    shares += [setup_share(sizes, [run], 1) for run in parts]
    assert max(shares) <= 0.1, shares
    for job in jobs:
        assert (
            job["resources"]["slurm_partition"] == CLUSTER["gpu_partition"] and job["resources"]["gpu"] == "1"
        )
