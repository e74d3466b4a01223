"""Config validation: good configs pass, each kind of bad config fails naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from rerank_scaling.workflow.load import ConfigError, load_config, validate_config

BENCHMARK_CONFIGS = Path(__file__).resolve().parents[1] / "benchmarks" / "configs"


def test_shipped_configs_are_valid(repo):
    assert load_config(repo / "config.yaml")["run_name"] == "default"
    assert load_config(repo / "config.paper.yaml")["dataset"]["source"] == "ir_datasets"


@pytest.mark.parametrize("overlay", sorted(BENCHMARK_CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_benchmark_overlays_are_valid_on_the_default(repo, overlay):
    """The measured alternatives to the default (benchmarks/configs) pass every check as Snakemake
    merges them over config.yaml (without the keys only a benchmark script reads), and each writes
    to its own run folder."""
    from ladder_options import pipeline_overlay

    config = load_config(repo / "config.yaml")
    update_config(config, pipeline_overlay(yaml.safe_load(overlay.read_text())))
    assert validate_config(config)["run_name"] not in ("default", "paper")


def _break(config: dict, path: list, value) -> dict:
    node = config
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return config


_DELETE = object()

BAD = [
    pytest.param(["training", "learning_rate"], 1e-4, "training", "learning_rate", id="unknown-key"),
    pytest.param(["training", "lr"], "fast", "training.lr", "not of type", id="bad-type"),
    pytest.param(
        ["training", "objectives"],
        ["pointwise", "pairwize"],
        "training.objectives[1]",
        "pairwize",
        id="unknown-objective",
    ),
    pytest.param(["models", 0, "layers"], -2, "models[0].layers", "minimum", id="negative-size"),
    pytest.param(["dataset", "builtin"], _DELETE, "dataset.builtin", "missing", id="missing-dataset"),
    pytest.param(["dataset", "source"], "msmarco", "dataset.source", "one of", id="unknown-source"),
    pytest.param(["retrieval", "b"], 1.5, "retrieval.b", "maximum", id="out-of-range"),
    pytest.param(
        ["training", "attention"], ["sparse"], "training.attention[0]", "does not match", id="bad-attention"
    ),
    pytest.param(["models", 1, "name"], "L1", "models", "duplicate", id="duplicate-model"),
    pytest.param(
        ["models", 0, "hidden"],
        999,
        "models[0].hidden",
        "a ladder model does not read 'hidden'",
        id="ladder-hidden",
    ),
    pytest.param(
        ["evaluation", "max_queries"],
        {"devv": 2},
        "evaluation.max_queries.devv",
        "use one of ['dev', 'test']",
        id="max-queries-split",
    ),
    pytest.param(
        ["evaluation", "ce_sizes"],
        [4, 4],
        "evaluation.ce_sizes",
        "lists 4 more than once",
        id="ce-sizes-twice",
    ),
    pytest.param(
        ["evaluation", "relative_prob_k"],
        [1, 3, 1],
        "evaluation.relative_prob_k",
        "lists 1 more than once",
        id="relative-prob-k-twice",
    ),
    pytest.param(
        ["training", "seeds"], [13, 13], "training.seeds", "lists 13 more than once", id="seed-twice"
    ),
    pytest.param(
        ["training", "max_length"],
        1024,
        "training.max_length",
        "more than the 512 positions of L1, L2, L3, L4, L6 (max_position_embeddings in config.json)",
        id="max-length-positions",
    ),
    pytest.param(
        ["dataset", "eval_splits"],
        ["dev", "validation"],
        "dataset.eval_splits",
        "validation",
        id="unknown-split",
    ),
    pytest.param(["fitting", "bootstrapp"], 10, "fitting", "bootstrapp", id="fitting-unknown-key"),
    pytest.param(["fitting", "metrics"], ["nDCG@11"], "fitting.metrics[0]", "CE@16", id="unproduced-metric"),
    pytest.param(
        ["fitting", "metrics"], ["CE@64"], "fitting.metrics[0]", "evaluation.ce_sizes", id="ce-size"
    ),
    pytest.param(["fitting", "uncertainty"], "boot", "fitting.uncertainty", "one of", id="fitting-enum"),
    pytest.param(["fitting", "splits"], ["train"], "fitting.splits", "eval_splits", id="fitting-split"),
    pytest.param(
        ["evaluation", "rerank_depth"],
        500,
        "evaluation.rerank_depth",
        "raise retrieval.depth",
        id="rerank-depth",
    ),
    pytest.param(
        ["examples", "negative_depth"], 500, "examples.negative_depth", "retrieval.depth", id="negative-depth"
    ),
    pytest.param(
        ["training", "max_steps"], 3, "training.max_steps", "training.checkpoints", id="too-few-steps"
    ),
    pytest.param(
        ["dataset", "builtin", "train_queries"],
        2,
        "training.checkpoints",
        "at most 1 optimizer",
        id="few-examples",
    ),
    pytest.param(["models", 0, "layers"], 12, "models[0].layers", "has 6", id="ladder-deeper-than-base"),
    pytest.param(
        ["models", 0, "path"], "/no/such/model", "models[0].path", "not a directory", id="model-path"
    ),
    pytest.param(
        ["models", 0, "path"],
        "package:no_such_package/model",
        "models[0].path",
        "not installed",
        id="model-package",
    ),
    pytest.param(["evaluation", "unit"], "query", "evaluation.unit", "one of", id="evaluation-unit"),
    pytest.param(
        ["dataset", "max_unknown_qrels_share"],
        2,
        "dataset.max_unknown_qrels_share",
        "maximum",
        id="share-range",
    ),
]


@pytest.mark.parametrize(("path", "value", "field", "hint"), BAD)
def test_bad_config_names_the_field(default_config, path, value, field, hint):
    config = _break(default_config, path, value)
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    message = str(err.value)
    assert f"'{field}" in message, message
    assert hint in message, message


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["training", "objectives"], ["pointwise", "pairwize"], "training.objectives[1]"),
        (["evaluation", "rerank_depth"], 500, "evaluation.rerank_depth"),
        (["training", "max_length"], 1024, "training.max_length"),
        (["models", 0, "hidden"], 999, "models[0].hidden"),
    ],
)
def test_bad_config_fails_snakemake_before_any_job(repo, tmp_path, default_config, path, value, field):
    import subprocess
    import sys

    import yaml

    bad = _break(default_config, path, value)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert field in result.stdout + result.stderr


def test_a_local_collection_that_does_not_exist_is_named(default_config, tmp_path):
    default_config["dataset"].update(source="local", local={"path": str(tmp_path / "nowhere")})
    with pytest.raises(ConfigError, match=r"'dataset.local.path': .*nowhere is not a directory"):
        validate_config(default_config)
    (tmp_path / "nowhere").mkdir()
    with pytest.raises(ConfigError, match=r"'dataset.local.path': .*missing .*corpus.jsonl"):
        validate_config(default_config)


def test_fitted_metrics_follow_the_evaluation_settings(default_config):
    from rerank_scaling.evaluation.eval_settings import EvalSettings
    from rerank_scaling.evaluation.metrics import evaluate
    from rerank_scaling.registries.measures import DROPPED
    from rerank_scaling.settings import settings_of
    from rerank_scaling.workflow.result_checks import evaluation_metrics

    evaluation = {"rerank_depth": 10, "ce_sizes": [4, 8], "relative_prob_k": [2], "rr_m": [3]}
    produced = evaluation_metrics(evaluation)
    assert produced == ["nDCG@10", "AP", "RR@10", "R@10", "P@10", "CE@4", "CE@8", "RelP@2", "RRstar@3"]
    # the config check's list (the registry's, read at parse time) is the evaluation's own rows
    written = evaluate({}, {}, {}, settings_of(EvalSettings, evaluation).metric_settings())["metric"]
    assert produced == [name for name in written if not name.endswith(DROPPED)]
    default_config["evaluation"]["ce_sizes"] = [64]
    default_config["evaluation"]["rerank_depth"] = 64
    default_config["fitting"]["metrics"] = ["nDCG@10", "CE@64", "RRstar@10", "RelP@3", "AP"]
    assert validate_config(default_config)


def test_a_scratch_model_reads_vocab_size_and_nothing_else(default_config):
    scratch = {"name": "S1", "family": "scratch", "layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}
    default_config["models"][0] = {**scratch, "role": "fit", "vocab_size": 500}
    validate_config(default_config)
    default_config["models"][0]["path"] = "/models/x"
    with pytest.raises(ConfigError, match=r"'models\[0\].path': a scratch model does not read 'path'"):
        validate_config(default_config)


def test_max_length_is_checked_against_positions_less_robertas_padding_offset():
    from rerank_scaling.workflow.training_checks import usable_positions

    assert usable_positions({"model_type": "bert", "max_position_embeddings": 512}) == 512
    assert (
        usable_positions({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    )
    assert usable_positions({"model_type": "bert"}) is None  # no limit given: not checked


def test_ir_datasets_max_queries_name_configured_splits(default_config):
    default_config["dataset"].update(
        source="ir_datasets",
        ir_datasets={
            "corpus": "cranfield",
            "splits": {"train": "cranfield", "dev": "cranfield", "test": "cranfield"},
            "max_queries": {"trian": 5, "dev": 3},
        },
    )
    with pytest.raises(ConfigError, match=r"'dataset.ir_datasets.max_queries.trian': 'trian' is not a split"):
        validate_config(default_config)


def test_a_price_for_an_unknown_annotation_source_is_an_error(default_config):
    default_config.setdefault("planning", {})["annotation_cost_per_pair"] = {"humna": 0.6}
    with pytest.raises(
        ConfigError, match=r"'planning.annotation_cost_per_pair.humna': 'humna' is not an annotation"
    ):
        validate_config(default_config)
    default_config["planning"]["annotation_cost_per_pair"] = {"human": 0.6, "ict": 0.0}
    validate_config(default_config)


def test_a_relevance_map_key_that_is_not_a_grade_is_an_error(default_config):
    default_config["dataset"].update(
        source="ir_datasets",
        ir_datasets={"corpus": "cranfield", "splits": {s: "cranfield" for s in ("train", "dev", "test")}},
    )
    default_config["dataset"]["ir_datasets"]["relevance_map"] = {"one": 4}
    with pytest.raises(ConfigError, match=r"'dataset.ir_datasets.relevance_map': 'one' does not match"):
        validate_config(default_config)


def test_the_fast_yaml_loader_reads_the_configs_and_schema_as_the_safe_loader_does():
    """settings.load_yaml (libyaml's parser where PyYAML has it) builds what yaml.safe_load builds
    from every file the workflow reads as YAML: the shipped configs, the test configs, the schema."""
    from rerank_scaling.settings import load_yaml

    repo = BENCHMARK_CONFIGS.parents[1]
    paths = [
        repo / "config.yaml",
        repo / "config.paper.yaml",
        *sorted((repo / "tests" / "configs").glob("*.yaml")),
        *sorted(BENCHMARK_CONFIGS.glob("*.yaml")),
        repo / "src" / "rerank_scaling" / "schemas" / "config.schema.yaml",
    ]
    for path in paths:
        text = path.read_text()
        assert load_yaml(text) == yaml.safe_load(text), path
