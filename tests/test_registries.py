"""Each registry owns its concept once: a toy objective, law, metric and size axis
(``tests/registry_toys.py``: one definition and one registry line each, plus the schema's enum)
reach the pipeline's consumers (settings, step counts, example files, config checks, fitting,
metric computation, the laws' N and the answer) with no other edit; and the schema's enums list
exactly what the registries hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd
import pytest
import registry_toys as toys

from rerank_scaling import settings as config_schema
from rerank_scaling.data.fraction_check import fraction_problems
from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.evaluation.metrics import evaluate, metric_names
from rerank_scaling.forecast.table import known_metric
from rerank_scaling.laws import registry as law_registry
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import prepare
from rerank_scaling.laws.runner import run_protocols
from rerank_scaling.laws.synthetic import synthetic_metrics_table
from rerank_scaling.registries import measures as metric_registry
from rerank_scaling.registries import objectives as objective_registry
from rerank_scaling.registries import size_axes
from rerank_scaling.registries.measures import metric_spec
from rerank_scaling.registries.objectives import StepSettings
from rerank_scaling.report.answer import axis_label
from rerank_scaling.report.figures import size_column as figure_size_column
from rerank_scaling.training.objectives import load_examples
from rerank_scaling.workflow.load import validate_config
from rerank_scaling.workflow.result_checks import evaluation_metrics

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "rerank_scaling"
REGISTRIES = (
    objective_registry.OBJECTIVES,
    law_registry.REGISTRY,
    metric_registry.MEASURES,
    size_axes.SIZE_AXES,
)
ENUMS = {
    ("training", "objectives"): toys.TOY_OBJECTIVE.name,
    ("fitting", "size_axis"): toys.TOY_AXIS.name,
}


@pytest.fixture
def registered():
    """The toys registered (``registry_toys.register_toys``) and the schema's enums extended;
    both undone afterwards."""
    saved = [dict(registry) for registry in REGISTRIES]
    toys.register_toys()
    for path, name in ENUMS.items():
        enum_of(config_schema._schema(), *path).append(name)
    yield
    for path, name in ENUMS.items():
        enum_of(config_schema._schema(), *path).remove(name)
    for registry, before in zip(REGISTRIES, saved, strict=True):
        registry.clear()
        registry.update(before)


def enum_of(schema: dict, section: str, key: str) -> list:
    """The enum of config key ``section.key`` (of its items, for a list)."""
    node = schema["properties"][section]["properties"][key]
    return node["items"]["enum"] if "items" in node else node["enum"]


def test_the_schema_lists_what_the_registries_hold():
    assert enum_of(config_schema.schema(), "training", "objectives") == list(objective_registry.OBJECTIVES)
    assert enum_of(config_schema.schema(), "fitting", "size_axis") == list(size_axes.SIZE_AXES)
    evaluation = config_schema.schema()["properties"]["evaluation"]["properties"]
    assert set(metric_registry.settings_keys()) <= set(evaluation)
    assert set(metric_registry.settings_keys()) == set(MetricSettings.names()) - {
        "relevance_threshold",
        "seed",
    }


def pairs_and_groups(queries: int) -> dict[str, pd.DataFrame]:
    """Example files of ``queries`` queries: 4 pairs (1 positive + 3 negatives) and 1 group each."""
    pairs = pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(queries) for _ in range(4)],
            "query": "a query",
            "document": "a document",
            "label": [1.0, 0.0, 0.0, 0.0] * queries,
        }
    )
    groups = pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(queries)],
            "query": "a query",
            "documents": [["d"] * 4] * queries,
            "labels": [[1.0, 0.0, 0.0, 0.0]] * queries,
        }
    )
    return {"pointwise": pairs, "groups": groups}


def test_a_new_objective_reaches_settings_steps_examples_and_the_config_checks(
    registered, tmp_path, default_config
):
    name = toys.TOY_OBJECTIVE.name
    settings = StepSettings.of(
        objectives=(name, "listwise"),
        checkpoints=4,
        epochs=1.0,
        pointwise_batch_size=8,
        group_queries_per_batch=2,
    )
    assert settings.batch(name) == ("pointwise_batch_size", 8)
    # 6 queries: 24 pairs / 8 = 3 steps for the toy (it trains on pairs), 6 groups / 2 = 3 for listwise;
    # 12 queries give 6 steps each, room for the 4 checkpoints.
    short = fraction_problems(1.0, pairs_and_groups(6), settings)
    assert len(short) == 2 and f"gives {name} runs at most 3 optimizer steps" in short[0]
    assert "gives listwise runs at most 3 optimizer steps" in short[1]
    assert fraction_problems(1.0, pairs_and_groups(12), settings) == []
    frames = pairs_and_groups(3)
    for kind, frame in frames.items():
        frame.to_parquet(tmp_path / f"{kind}.parquet")
    dataset, pairs = load_examples(
        name, str(tmp_path / "pointwise.parquet"), str(tmp_path / "groups.parquet"), 1.0
    )
    assert dataset.column_names == ["query", "document", "label"] and len(dataset) == 12 and pairs == 3
    # The config layer: the schema (its enum) and the cross-field checks take it, steps included.
    default_config["training"]["objectives"] = [name]
    assert validate_config(default_config)["training"]["objectives"] == [name]
    default_config["training"]["checkpoints"] = 10**6
    with pytest.raises(ValueError, match=f"{name} training has at most"):
        validate_config(default_config)


def test_a_new_law_is_fitted_and_read_back(registered):
    table = synthetic_metrics_table(
        objectives=("pointwise",), checkpoints=6, splits=("dev",), metrics=("nDCG@10",)
    )
    fits, forecasts, _ = run_protocols(table, FitSettings.of(bootstrap=3, backtest=False))
    toy = fits[fits["law"] == toys.TOY_LAW]
    assert len(toy) == 1 and toy["protocol"].tolist() == ["model"] and toy["status"].iloc[0] != "failed"
    assert (forecasts["law"] == toys.TOY_LAW).any()
    assert law_registry.law(toys.TOY_LAW, "nDCG@10").formula == "a + b ln N"


def test_a_new_metric_is_computed_named_bounded_and_fittable(registered, default_config):
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.5}, "q2": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.5}}
    qrels = {"q1": {"c": 1}, "q2": {"d": 1}}
    settings = MetricSettings.of(ce_sizes=(2,), relative_prob_k=(1,), rr_m=(2,))
    assert "Hit@3" in metric_names(settings)
    table = evaluate(run, qrels, {q: list(d) for q, d in run.items()}, settings).set_index("metric")
    assert table.loc["Hit@3", "value"] == 0.5 and table.loc["Hit@3", "n"] == 2
    assert metric_spec("Hit@3").direction == 1 and metric_spec("Hit@3").range == (0.0, 1.0)
    assert known_metric("Hit@3") and not known_metric("Hit")
    assert "Hit@3" in evaluation_metrics(default_config["evaluation"])
    default_config["fitting"]["metrics"] = ["Hit@3"]
    validate_config(default_config)  # fitted metrics must be ones the evaluation writes: it does


def test_no_law_name_is_written_outside_the_law_registry():
    """Law names are string constants in ``laws/registry.py`` (and the forms that build them, in
    ``laws/forms.py``) only; every other module names a law through the registry's constants."""
    names = {*law_registry.REGISTRY, law_registry.ENSEMBLE, law_registry.TWO_STEP}
    owners = {PACKAGE / "laws" / "registry.py", PACKAGE / "laws" / "forms.py"}
    written = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in owners:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value in names or re.fullmatch(rf"{law_registry.BNSL}\d*", node.value):
                    written.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert written == []


def test_the_relative_probability_is_not_named_as_rank_biased_precision(default_config):
    settings = MetricSettings.of(relative_prob_k=(1, 3), ce_sizes=(2,), rr_m=(2,))
    names = metric_names(settings)
    assert "RelP@1" in names and not any(name.startswith("RBP") for name in names)
    assert [law.name for law in law_registry.laws_for("model", "RelP@3")].count(law_registry.RELATIVE) == 1
    default_config["evaluation"]["rbp_k"] = default_config["evaluation"].pop("relative_prob_k")
    with pytest.raises(ValueError, match="evaluation.rbp_k.*renamed.*evaluation.relative_prob_k"):
        validate_config(default_config)


def test_a_new_size_axis_sets_the_laws_n_and_is_named_in_the_answer(registered, default_config):
    metrics = synthetic_metrics_table(
        objectives=("pointwise",), checkpoints=3, splits=("dev",), metrics=("nDCG@10",)
    )
    metrics["layers"] = metrics["model"].str.removeprefix("s").astype(int) * 2  # s1..s4: 2..8 layers
    sizes = prepare(metrics, FitSettings.of(size_axis=toys.TOY_AXIS.name)).groupby("model")["size"].first()
    assert sizes.to_dict() == {f"s{i}": 2.0 * i for i in range(1, 5)}
    assert axis_label(toys.TOY_AXIS.name) == "encoder layers"
    forecast = pd.DataFrame({"model": ["s4"], "size": [8.0]})
    assert figure_size_column(metrics, forecast) == "layers"
    default_config["fitting"]["size_axis"] = toys.TOY_AXIS.name
    assert validate_config(default_config)["fitting"]["size_axis"] == toys.TOY_AXIS.name
