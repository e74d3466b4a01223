"""Config validation: good configs pass, each kind of bad config fails naming the field."""

from __future__ import annotations

import pytest

from rerank_scaling.config import ConfigError, load_config, validate_config


def test_shipped_configs_are_valid(repo):
    assert load_config(repo / "config.yaml")["run_name"] == "default"
    assert load_config(repo / "config.paper.yaml")["dataset"]["source"] == "ir_datasets"


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
        ["dataset", "eval_splits"],
        ["dev", "validation"],
        "dataset.eval_splits",
        "validation",
        id="unknown-split",
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


def test_bad_config_fails_snakemake_before_any_job(repo, tmp_path, default_config):
    import subprocess
    import sys

    import yaml

    bad = _break(default_config, ["training", "objectives"], ["pointwise", "pairwize"])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "training.objectives[1]" in result.stdout + result.stderr
