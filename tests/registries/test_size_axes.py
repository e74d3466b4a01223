"""The size axis in one place: ``fitting.size_axis`` names one parameter count, and the
laws (:func:`rerank_scaling.laws.protocols.prepare`) and planning
(:func:`rerank_scaling.planning.plan_rows.make_plan`) read the same N of a model on each axis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from synthetic_runs import SCRATCH, joint_fit_rows, synthetic_metrics_table

from rerank_scaling.families.models import ModelStats
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import prepare
from rerank_scaling.planning.encoder_flops import EncoderShape
from rerank_scaling.planning.forecast import run_stats
from rerank_scaling.planning.measured_profiles import CostProfile
from rerank_scaling.planning.plan_rows import make_plan
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.records import METRIC_COLUMNS
from rerank_scaling.registries.size_axes import SIZE_AXES, model_size, size_column
from rerank_scaling.settings import with_defaults

SCHEMA = Path(__file__).resolve().parents[2] / "src" / "rerank_scaling" / "schemas" / "config.schema.yaml"


def test_every_axis_the_schema_allows_reads_a_column_every_size_record_has():
    fitting = yaml.safe_load(SCHEMA.read_text())["properties"]["fitting"]["properties"]
    assert fitting["size_axis"]["enum"] == list(SIZE_AXES)
    for axis in SIZE_AXES:
        column = size_column(axis)
        assert column in METRIC_COLUMNS
        assert column in {f.name for f in dataclasses.fields(ModelStats)}
        assert column in {f.name for f in dataclasses.fields(CostProfile)}
    assert model_size(ModelStats(10, 7, 2, 4), "total") == 10.0
    assert model_size(ModelStats(10, 7, 2, 4), "non_embedding") == 7.0


def test_an_unknown_size_axis_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown size axis 'embedding'; use one of non_embedding, total"):
        size_column("embedding")


def profile(name: str, params: int, non_embedding: int) -> CostProfile:
    """A measured profile of ``name`` (timings made up: only its parameter counts are read here)."""
    return CostProfile(
        key=name,
        device="cpu",
        device_kind="cpu",
        model=name,
        spec={**SCRATCH, "name": name},
        max_length=32,
        batch=8,
        steps=2,
        seq_len=32,
        params=params,
        non_embedding_params=non_embedding,
        shape=dataclasses.asdict(EncoderShape(2, 64, 256)),
        train_seconds_per_step=0.1,
        infer_seconds_per_batch=0.01,
        train_flops_analytic=1e9,
        train_flops_measured=1e9,
        infer_flops_analytic=3e8,
        infer_flops_measured=3e8,
        peak_memory_mb=100.0,
        torch_version="test",
    )


@pytest.mark.parametrize("axis", list(SIZE_AXES))
def test_the_laws_and_the_plan_read_the_same_size_on_each_axis(axis):
    metrics = synthetic_metrics_table(noise=0.0)
    assert (metrics["params"] != metrics["non_embedding_params"]).all()  # the axes differ here
    fitting = FitSettings.of(size_axis=axis)
    laws_size = prepare(metrics, fitting).groupby("model")["size"].first()
    models = with_defaults("models", [{**SCRATCH, "name": name} for name in ("s1", "s3", "s5")])
    fits = joint_fit_rows({"pointwise": ("ok", "")})
    settings = PlanSettings.of(profile=False, value_per_metric_point=None, value_reference=0.3)
    stats = run_stats(metrics, with_defaults("training", {"max_length": 256}))
    plan = make_plan(metrics, fits, models, [], settings, fitting, "cpu", 20, stats)
    assert plan.size_label == size_column(axis)
    assert plan.configured == {name: laws_size[name] for name in ("s1", "s3", "s5")}
    measured = profile("s1", 3_000_000, 2_000_000)
    profiled = make_plan(metrics, fits, models, [measured], settings, fitting, "cpu", 20, stats)
    row = next(r for r in profiled.rows if r["kind"] == "profile")
    assert row["size"] == {"total": 3e6, "non_embedding": 2e6}[axis]
