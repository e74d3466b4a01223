# Helpers shared by the rule files (config validation, paths, target lists, JSON params).
import copy
import json
import os
import shlex
import sys
from pathlib import Path

from rerank_scaling.workflow import job_server, timing
from rerank_scaling.workflow.eval_bundles import evaluation_bundles
from rerank_scaling.workflow.job_resources import JobSizes, longest_first, resources_for
from rerank_scaling.workflow.load import validate_config, validate_config_files
from rerank_scaling.workflow.resource_checks import memory_plans
from rerank_scaling.workflow.stages import (
    FIGURE_KINDS,
    GRID_KEYS,
    LAW_TABLES,
    PIN_FILE,
    PLANNED_GPU_ENV,
    EvalSettings,
    Grid,
    RunSpec,
    StepSettings,
    TrainSettings,
    annotation_files,
    part_section,
    pinned_models,
    planned_gpu_json,
    read_pins,
    record_source_digests,
    record_stage_digest,
    slug,
    without,
)
from rerank_scaling.workflow.workload import config_workload

# What the config files say, before the schema's defaults: the JSON params that decide re-runs
# (Snakemake re-runs a job when its params change) carry these, so where a default lives (schema or
# code) re-runs nothing. Each job fills the schema's defaults into the sections it is passed
# (rerank_scaling.settings.settings_from_dict), as validate_config does for `config` here.
WRITTEN = copy.deepcopy(config)

# Pinned revisions (rerank_scaling.hub.pins): `./run.sh --prefetch --pin` wrote PIN_FILE; every hub
# model named without a revision loads the commit it lists (not while the prefetch re-pins).
if not os.environ.get("RERANK_SCALING_PIN"):
    _PINS = read_pins(PIN_FILE)
    for _section in (config, WRITTEN):
        if "models" in _section:
            _section["models"] = pinned_models(_section["models"], _PINS)

# Fails at parse time, before any job runs, naming the field (or file:line) and the fix; then every
# section of `config` has every key (the schema's defaults, applied once: rerank_scaling.workflow.load).
validate_config_files(workflow.configfiles)
validate_config(config)

GRID = Grid.from_config(config)
RESULTS = f"results/{config['run_name']}"
WORKFLOW_CLOCK = timing.start(RESULTS)  # the Snakefile's onsuccess writes workflow_time.json
ENVS = "../envs"


def job_python():
    """The interpreter the rules' shells run (``rerank_python -m rerank_scaling.<stage>``): the one
    running Snakemake (the project's venv, by absolute path, so a job finds it without an activated
    venv or the venv on PATH: a cluster job starts from the login shell's PATH), or, with --sdm conda
    or apptainer, the environment's ``python`` with this checkout's ``src`` on PYTHONPATH (the env
    files carry the dependencies, not the project: Snakemake copies them to .snakemake/conda/, where
    a relative path to the project no longer points to it)."""
    from snakemake.settings.types import DeploymentMethod

    methods = workflow.deployment_settings.deployment_method
    if DeploymentMethod.CONDA in methods or DeploymentMethod.APPTAINER in methods:
        source = (Path(workflow.main_snakefile).parent / "src").resolve()
        return f"env PYTHONPATH={shlex.quote(str(source))} python"
    return shlex.quote(sys.executable)


# A local run's Python jobs fork from one process that has imported torch, transformers and
# sentence_transformers already (rerank_scaling.workflow.job_server: ~8 s saved per job); started in
# the Snakefile's onstart, stopped when the run ends. Not under SLURM (a forked job would live outside
# its job's cgroup) nor with conda/apptainer deployments (their jobs run another interpreter), nor with
# RERANK_SCALING_JOB_SERVER=off (for runs whose per-job CPU or memory is measured).
JOB_SERVER = []


def start_job_server():
    from snakemake.settings.types import DeploymentMethod

    methods = workflow.deployment_settings.deployment_method
    if (
        not job_server.wanted()
        or not workflow.local_exec
        or workflow.touch
        or "SLURM_JOB_ID" in os.environ
        or DeploymentMethod.CONDA in methods
        or DeploymentMethod.APPTAINER in methods
        or job_server.running()  # one this run's environment names (a test session's): used, left running
    ):
        return
    # in the compute jobs' import-time environment (their shells set HF_HUB_OFFLINE=1): a job whose
    # differs (the data jobs' where the user's has no HF_HUB_OFFLINE) starts as a plain process
    log = Path(RESULTS) / "logs" / "job_server.log"
    JOB_SERVER.append(job_server.start(log, env=job_server.COMPUTE_ENV))


def stop_job_server():
    while JOB_SERVER:
        job_server.stop(JOB_SERVER.pop())


# Rules call `rerank_python` (or `rerank_python_exec`, which replaces the job's shell, so that SLURM's
# SIGTERM reaches the trainer itself, and tells it the pid of the job's parent, Snakemake, whose death
# it then follows: rerank_scaling.parent_process.die_with_parent), shell functions every job's shell defines first (Snakemake's
# bash prefix, plus the functions): the interpreter is not in a rule's shell text, which Snakemake
# compares with the text that made its outputs, nor a param, so another venv path re-runs nothing.
# (The prefix is formatted like a shell command: its braces are doubled, here twice for .format.)
shell.prefix(
    "set -euo pipefail; rerank_python() {{{{ {0} ${{{{RERANK_SCALING_JOB_SERVER:+-m rerank_scaling.workflow.job_server run}}}} \"$@\"; }}}}; rerank_python_exec() {{{{ RERANK_SCALING_JOB_PARENT=$PPID exec {0} ${{{{RERANK_SCALING_JOB_SERVER:+-m rerank_scaling.workflow.job_server run}}}} \"$@\"; }}}}; ".format(
        job_python()
    )
)


# Each rule lists its stage's code digest as an input (Snakemake tracks shell text and params, not
# imported modules): a file per stage whose lines digest the entry module and every library module
# it imports (read from the imports by rerank_scaling.stage_code), rewritten at parse time only when
# their code changes. Editing the code re-runs the stage and its dependants; a comment, a docstring,
# a reformatting or a file rewritten with the same code re-runs nothing.


def stage_code_digest(entry):
    """A rule's code input: the digest file of stage ``entry``'s code, under results/<run>/code/."""
    return str(record_stage_digest(entry, f"{RESULTS}/code", "src"))

# Compute jobs (train, evaluate, plan) run with HF_HUB_OFFLINE=1 in their shell: models come from
# the Hugging Face cache that the local rule `prefetch` (./run.sh --prefetch) fills on the
# submitting node; a missing one fails early, naming the model and that command.


def directory_of(kind, key, levels=1):
    """A params function: the directory ``levels`` up from the first file of input/output ``key``."""

    def derive(wildcards, input, output):
        files = getattr(input if kind == "input" else output, key)
        first = files if isinstance(files, str) else files[0]
        return str(Path(first).parents[levels - 1])

    return derive


def section_json(name, *ignored):
    """A config section as written (WRITTEN) as JSON, passed to stage entry points as a param
    (changes re-run the rule), without the keys of the ``ignored`` groups (e.g. a settings class's
    ``RESOURCE_KEYS``). A section the files leave out is ``{}``: all the schema's defaults."""
    section = WRITTEN[name] if name in WRITTEN else {}
    return json.dumps(without(section, *ignored) if ignored else section, sort_keys=True)


def evaluation_json(model_free=False):
    """The evaluation section without `unit` and the job resources: how the work is cut into jobs
    and what each job gets change no result, so switching them re-runs no finished job (Snakemake
    re-runs a rule when its params change; threads reach the job as `--threads {threads}`).
    ``model_free`` (BM25's evaluation) also drops what only concerns scoring checkpoints."""
    ignored = (*EvalSettings.JOB_KEYS, *(EvalSettings.SCORING_KEYS if model_free else ()))
    return json.dumps(without(WRITTEN["evaluation"], ignored, EvalSettings.RESOURCE_KEYS), sort_keys=True)


def candidate_selection_json():
    """The evaluation keys that choose a split's candidate pairs (depth, query subset): all the
    tokenization jobs read, so that changing how pairs are scored re-tokenizes nothing."""
    written = WRITTEN["evaluation"]
    return json.dumps({key: written[key] for key in EvalSettings.CANDIDATE_KEYS if key in written}, sort_keys=True)


def run_dir(stage, wildcards):
    """Per-run directory of a stage, e.g. results/default/checkpoints/<run>."""
    return f"{RESULTS}/{stage}/{wildcards.run}"


def log_path(stage, name):
    return f"{RESULTS}/logs/{stage}/{name}.log"


def benchmark_path(stage, name):
    return f"{RESULTS}/benchmarks/{stage}/{name}.tsv"


def eval_splits():
    return config["dataset"]["eval_splits"]


def all_splits():
    return [config["dataset"]["train_split"], *eval_splits()]


def checkpoint_sidecars(wildcards):
    return [
        f"{RESULTS}/checkpoints/{wildcards.run}/ckpt-{k:02d}/checkpoint.json"
        for k in GRID.checkpoint_indices()
    ]


def eval_unit():
    """evaluation.unit: what one evaluation job covers (run | checkpoint | checkpoint_split)."""
    return config["evaluation"]["unit"]


def eval_parts():
    """A run's evaluation jobs below unit run: ckpt-XX, or ckpt-XX.<split>; a split of
    evaluation.final_only_splits only at the final checkpoint."""
    final_only = config["evaluation"]["final_only_splits"]
    last = GRID.checkpoint_indices()[-1]
    if eval_unit() == "checkpoint":
        return [f"ckpt-{k:02d}" for k in GRID.checkpoint_indices()]
    return [
        f"ckpt-{k:02d}.{split}"
        for k in GRID.checkpoint_indices()
        for split in eval_splits()
        if k == last or split not in final_only
    ]


def part_splits(wildcards):
    """The splits of an evaluation part: the one after the dot, else every evaluation split."""
    split = wildcards.part.partition(".")[2]
    return [split] if split else eval_splits()


def part_sidecar(wildcards):
    ckpt = wildcards.part.partition(".")[0]
    return f"{RESULTS}/checkpoints/{wildcards.run}/{ckpt}/checkpoint.json"


def part_split_files(pattern):
    """An input function: ``pattern`` (under RESULTS, with {split}) for each split of the part."""

    def files(wildcards):
        return expand(f"{RESULTS}/{pattern}", split=part_splits(wildcards))

    return files


def split_token_files(splits_of):
    """An input function: the run's model's tokenized pairs (rule split_tokens) of each split that
    ``splits_of(wildcards)`` names; none for the scratch family, whose runs train their own tokenizer."""

    def files(wildcards):
        model = GRID.model(RunSpec.parse(wildcards.run).model)
        if model["family"] == "scratch":
            return []
        return expand(f"{RESULTS}/eval/tokens/{model['name']}/{{split}}.parquet", split=splits_of(wildcards))

    return files


def run_tokens_dir(wildcards):
    return f"{RESULTS}/eval/tokens/{RunSpec.parse(wildcards.run).model}"


def run_metric_tables(wildcards=None):
    """The per-job metric tables merged into metrics/all.parquet: each evaluation bundle's (BUNDLES),
    then the other runs' by evaluation.unit."""
    bundles = [f"{RESULTS}/eval/bundles/{name}/metrics.parquet" for name in BUNDLES]
    runs = [run for run in GRID.run_ids() if run not in BUNDLE_OF]
    if eval_unit() == "run":
        return bundles + [f"{RESULTS}/eval/{run}/metrics.parquet" for run in runs]
    return bundles + [f"{RESULTS}/eval/{run}/parts/{part}.parquet" for run in runs for part in eval_parts()]


def run_per_query_tables(wildcards=None):
    """The per-query tables written beside run_metric_tables, by the same jobs: per_query.parquet
    beside a metrics.parquet, else parts/<part>.per_query.parquet."""
    paths = [Path(path) for path in run_metric_tables()]
    beside = {path: path.name == "metrics.parquet" for path in paths}
    return [
        str(path.with_name("per_query.parquet") if beside[path] else path.with_suffix(".per_query.parquet"))
        for path in paths
    ]


def fitted_metrics():
    return config["fitting"]["metrics"]


def fitted_splits():
    return config["fitting"]["splits"] or eval_splits()


def final_targets():
    # the published checkpoints too: a sidecar removed (the repair of a damaged checkpoint,
    # rerank_scaling.training.checkpoint_store.repair_hint) re-runs that run's training job
    return [
        *expand(
            f"{RESULTS}/checkpoints/{{run}}/ckpt-{{k:02d}}/checkpoint.json",
            run=GRID.run_ids(),
            k=GRID.checkpoint_indices(),
        ),
        f"{RESULTS}/metrics/all.parquet",
        f"{RESULTS}/laws/fits.parquet",
        f"{RESULTS}/summary.md",
        f"{RESULTS}/answer.html",
        f"{RESULTS}/planning/plan.parquet",
        f"{RESULTS}/figures/budget_curves.png",
        f"{RESULTS}/figures/roi_frontier.png",
    ]


def figure_files(ext, kind=None):
    """Per-metric figure files of the report stage (every kind, or one)."""
    return expand(
        f"{RESULTS}/figures/{{kind}}__{{metric}}__{{split}}.{ext}",
        kind=[kind] if kind else FIGURE_KINDS,
        metric=[slug(m) for m in fitted_metrics()],
        split=fitted_splits(),
    )


def figure_reports(ext):
    """The PNG figures wrapped for the Snakemake report, one subcategory and caption per figure kind."""
    files = [(path, kind) for kind in FIGURE_KINDS for path in figure_files(ext, kind)]
    captioned = [(path, f"../report/figures_{kind}.rst", kind.replace("_", " ")) for path, kind in files]
    return [report(path, caption=c, category="Figures", subcategory=sub) for path, c, sub in captioned]


def law_table_files():
    """The law-fitting tables; the CSV of each is also a page of the Snakemake report."""
    caption = "../report/law_tables.rst"
    csv = [f"{RESULTS}/laws/tables/{name}.csv" for name in LAW_TABLES]
    other = expand(f"{RESULTS}/laws/tables/{{name}}.{{ext}}", name=LAW_TABLES, ext=["md", "tex"])
    return [report(path, caption=caption, category="Tables", subcategory="scaling laws") for path in csv] + other


def model_spec_json(name):
    """The models[] entry of model ``name`` as written (WRITTEN), as JSON."""
    (spec,) = [spec for spec in WRITTEN["models"] if spec["name"] == name]
    return json.dumps(spec, sort_keys=True)


def model_json(wildcards):
    """The models[] entry of a run, as written, as JSON."""
    return model_spec_json(RunSpec.parse(wildcards.run).model)


def examples_path(source, kind):
    """The training examples of ``kind`` (pointwise | groups) of an annotation source: the human
    ones (rule training_examples), else rule annotation_examples'."""
    return f"{RESULTS}/examples/{kind}.parquet" if source == "human" else f"{RESULTS}/examples/{source}/{kind}.parquet"


# The generated-query sources (training.annotation_files) the grid trains on, by name.
ANNOTATION_FILES = annotation_files(config["training"])


def annotation_file_input(key):
    """An input function: the user's file ``key`` (queries | qrels) of the source in {split}."""
    return lambda wildcards: str(getattr(ANNOTATION_FILES[wildcards.split], key))


def annotation_file_provenance(wildcards):
    """A params function: the provenance text of the source in {split}."""
    return ANNOTATION_FILES[wildcards.split].provenance


def run_examples(kind):
    """An input function: the run's training examples of ``kind``, from its annotation source."""
    return lambda wildcards: examples_path(RunSpec.parse(wildcards.run).annotations, kind)


def source_examples(kind):
    """An input function: the examples of ``kind`` of the source in the ``source`` wildcard."""
    return lambda wildcards: examples_path(wildcards.source, kind)


def run_fraction_check(wildcards):
    """The train job of a run on a data fraction < 1 waits for its fraction's check (rule
    fraction_check); a full-data run has none, so the axis adds no input to it."""
    spec = RunSpec.parse(wildcards.run)
    if spec.data_fraction == 1.0:
        return []
    return f"{RESULTS}/examples/checks/{spec.annotations}/fraction-{spec.data_fraction!r}.json"


def run_training_json():
    """What one training run needs of the training section: not the grid keys (its id says which
    run it is) nor the job resources, so that adding a seed or changing threads re-trains no
    finished run (Snakemake re-runs a job when its params change). A new objective still does,
    through the examples job (training_steps_json below)."""
    return json.dumps(without(WRITTEN["training"], GRID_KEYS, TrainSettings.RESOURCE_KEYS), sort_keys=True)


# The memory preflight (rerank_scaling.planning.memory): how each (model, objective) trains on a GPU
# of gpu_memory_gb. validate_config has refused the runs nothing fits; the notes say what it changed.
MEMORY_PLANS = memory_plans(config)
for _note in sorted({plan.note for plan in MEMORY_PLANS.values() if plan.note}):
    print(f"memory preflight: {_note}", file=sys.stderr)

# The GPU those plans are for, in the environment every job inherits (locally, and through sbatch
# --export=ALL): a GPU job checks the card it got against it at start-up (planning.gpu_fit), and
# re-plans its micro-batches or stops naming the card and the fix. Not a param, so that changing it
# re-runs nothing. cluster.gpu_constraint asks SLURM for such cards (job_resources.placement).
os.environ[PLANNED_GPU_ENV] = planned_gpu_json(config["gpu_memory_gb"], config["planning"]["gpu_name"])


# What every job asks the cluster for (rerank_scaling.workflow.job_resources): the GPU partition for the rules
# that run a model, the CPU partition for the rest, the account, and memory and time sized per model
# from the cost model and the data's size, clamped to the config's cluster floor and cap. Declared in
# the rules, so a SLURM run needs no --set-resources (which would replace a profile's whole block).
SIZES = JobSizes.from_config(
    config,
    config_workload(config),
    {key: plan.gradient_checkpointing for key, plan in MEMORY_PLANS.items()},
)


def job_resources(rule_name, **values):
    """A rule's resources: placement (partition, account, gpu) plus ``values`` (mem_mb and runtime
    in MB and minutes, grown with the attempt and clamped; or functions of wildcards and attempt),
    for a rule's ``resources: **job_resources(...)``."""
    return resources_for(SIZES, rule_name, **values)


def train_resources():
    return job_resources(
        "train",
        mem_mb=lambda wildcards, attempt: SIZES.model_mem_mb("train", wildcards.run, attempt),
        runtime=lambda wildcards, attempt: SIZES.train_runtime(wildcards.run, attempt),
        # SIGTERM 120 s before the time limit (SLURM's default notice is KillWait, often 30 s): the
        # trainer saves its state at the end of the current step, and the retry resumes from there
        slurm_extra="'--signal=TERM@120'",
    )


def evaluation_resources(rule_name, checkpoints_per_split):
    """Resources of an evaluation rule; ``checkpoints_per_split(wildcards)``: split -> checkpoints
    one job scores."""
    return job_resources(
        rule_name,
        mem_mb=lambda wildcards, attempt: SIZES.model_mem_mb("evaluate", wildcards.run, attempt),
        runtime=lambda wildcards, attempt: SIZES.evaluation_runtime(
            wildcards.run, checkpoints_per_split(wildcards), attempt
        ),
    )


def run_checkpoints_per_split(wildcards):
    """An evaluate_run job: every checkpoint of each split, the final one only of final_only_splits."""
    final_only = config["evaluation"]["final_only_splits"]
    every = len(GRID.checkpoint_indices())
    return {split: 1 if split in final_only else every for split in eval_splits()}


# Evaluation bundles (rerank_scaling.workflow.eval_bundles): the runs whose evaluation.unit jobs would spend
# more than cluster.max_setup_share of their time on set-up (imports, parse, table reads), by the
# cost model, are scored whole, several a job, by rule evaluate_bundle.
BUNDLES = {
    f"b{index}": runs
    for index, runs in enumerate(evaluation_bundles(SIZES, GRID.run_ids(), len(GRID.checkpoint_indices())))
}
BUNDLE_OF = {run: name for name, runs in BUNDLES.items() for run in runs}

# The model jobs' Snakemake priorities, costliest first (longest_first: a large model's evaluation
# does not start alone at the end of the run); an evaluate_part job takes its run's evaluate_run rank.
MODEL_PRIORITY = longest_first(
    {
        **{("train", run): SIZES.train_flops(run) for run in GRID.run_ids()},
        **{
            ("evaluate_run", run): SIZES.evaluation_flops(run, run_checkpoints_per_split(None))
            for run in GRID.run_ids()
        },
        **{
            ("evaluate_bundle", name): SIZES.bundle_flops(runs, run_checkpoints_per_split(None))
            for name, runs in BUNDLES.items()
        },
    }
)


def model_priority(rule_name, wildcard="run"):
    """A rule's ``priority:``: MODEL_PRIORITY of the job's ``wildcard`` (0 for one not in the grid)."""
    return lambda wildcards: MODEL_PRIORITY.get((rule_name, getattr(wildcards, wildcard)), 0)


def bundle_sidecars(wildcards):
    """Every checkpoint sidecar of every run of the bundle."""
    return [
        f"{RESULTS}/checkpoints/{run}/ckpt-{k:02d}/checkpoint.json"
        for run in BUNDLES[wildcards.bundle]
        for k in GRID.checkpoint_indices()
    ]


def bundle_token_files(wildcards):
    """The tokenized pairs of each model of the bundle's runs (none for the scratch family)."""
    models = dict.fromkeys(RunSpec.parse(run).model for run in BUNDLES[wildcards.bundle])
    return [
        path
        for model in models
        if GRID.model(model)["family"] != "scratch"
        for path in expand(f"{RESULTS}/eval/tokens/{model}/{{split}}.parquet", split=eval_splits())
    ]


def bundle_resources():
    """An evaluate_bundle job: the largest model's memory, the time of all its runs' scoring."""
    return job_resources(
        "evaluate_bundle",
        mem_mb=lambda wildcards, attempt: max(
            SIZES.model_mem_mb("evaluate", run, attempt) for run in BUNDLES[wildcards.bundle]
        ),
        runtime=lambda wildcards, attempt: SIZES.bundle_runtime(
            BUNDLES[wildcards.bundle], run_checkpoints_per_split(wildcards), attempt
        ),
    )


def part_checkpoints_per_split(wildcards):
    """An evaluate_part job: one checkpoint of each of its splits."""
    return {split: 1 for split in part_splits(wildcards)}


def memory_plan_json(wildcards):
    """The run's memory plan for the train job: checkpointing and micro-batches only (not the planned
    peak or the note), so a change re-trains only the runs whose training changes. micro_batches 0
    (shape unknown here, not prefetched): the job plans for itself from the model it loads."""
    run = RunSpec.parse(wildcards.run)
    plan = MEMORY_PLANS[run.model, run.objective]
    how = {"gradient_checkpointing": plan.gradient_checkpointing, "micro_batches": plan.micro_batches}
    if not plan.micro_batches:
        how["gpu_memory_gb"] = config["gpu_memory_gb"]
    return json.dumps(how, sort_keys=True)


def training_steps_json():
    """The training keys that set how many optimizer steps a run has (StepSettings), as written: the
    examples job checks them against the examples it builds (only these, so that other training
    changes do not re-run it)."""
    written = WRITTEN["training"]
    return json.dumps({key: written[key] for key in StepSettings.__dataclass_fields__ if key in written}, sort_keys=True)


# The data as inputs (rerank_scaling.data.source_digests): each file of a local collection has a
# digest file, rewritten at parse time only when the file's content changes, which the job reading
# the file lists as input; every source's part jobs get the dataset keys that set their content.
SOURCE_DIGESTS = record_source_digests(WRITTEN["dataset"], f"{RESULTS}/data/sources")


def source_digest(name):
    """An input function: the digest file of the collection file ``name`` (with {split}); none
    unless the source is a local collection."""

    def files(wildcards):
        path = SOURCE_DIGESTS.get(name.format(**wildcards))
        return [str(path)] if path else []

    return files


def dataset_part_json(part):
    """A params function: the dataset keys that set ``part``'s content (source_digests.part_section)."""

    def keys(wildcards):
        section = part_section(WRITTEN["dataset"], part, wildcards.get("split"))
        return json.dumps(section, sort_keys=True)

    return keys


def relevance_threshold_arg(wildcards):
    """The evaluated splits' qrels job refuses a split without a relevant judgement."""
    if wildcards.split not in eval_splits():
        return ""
    return f"--relevance-threshold {config['evaluation']['relevance_threshold']}"
