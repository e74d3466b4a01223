"""A GPU job's start-up check of the card it got, on the paper grid's own memory plans: the plan
kept on the planned card, re-planned on a smaller one, refused (naming the card, its memory and the
fix) on one too small. Cards as ``torch.cuda.get_device_properties`` describes them (name, total
memory in bytes); no GPU is needed, and none is pretended: the decision takes the properties."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import REPO

from rerank_scaling.planning import gpu_fit
from rerank_scaling.planning.gpu_fit import GpuCard, GpuTooSmall, fit_plan, gpu_report
from rerank_scaling.planning.memory import MemoryRefused, usable_bytes
from rerank_scaling.workflow.load import load_config
from rerank_scaling.workflow.resource_checks import config_memory_plans, memory_plans

H100 = GpuCard("NVIDIA H100 80GB HBM3", 85_029_158_912)
A100_40 = GpuCard("NVIDIA A100-SXM4-40GB", 42_505_273_344)
T4 = GpuCard("Tesla T4", 15_843_721_216)


@pytest.fixture(scope="module")
def paper() -> dict:
    return load_config(REPO / "config.paper.yaml")


def replan(config: dict, model: str, objective: str):
    """The workflow's own planning rule for a card of ``gb`` GB (config_memory_plans)."""

    def plan(gb: float):
        found = config_memory_plans({**config, "gpu_memory_gb": gb})[model, objective]
        if isinstance(found, MemoryRefused):
            raise found
        return found

    return plan


def test_the_planned_card_keeps_the_workflows_plan(paper) -> None:
    plans = memory_plans(paper)
    for (model, objective), plan in plans.items():
        kept = fit_plan(plan, H100, paper["gpu_memory_gb"], replan(paper, model, objective), model)
        assert kept == plan


def test_a_smaller_card_gets_a_leaner_plan_that_fits_it(paper, caplog) -> None:
    plans = memory_plans(paper)
    planned = plans["ettin-1b", "listwise"]
    with caplog.at_level(logging.WARNING):
        fitted = fit_plan(planned, A100_40, 80, replan(paper, "ettin-1b", "listwise"), "ettin-1b listwise")
    assert fitted != planned
    assert fitted.peak_gb * 1e9 <= usable_bytes(A100_40.memory_gb) < planned.peak_gb * 1e9
    assert "NVIDIA A100-SXM4-40GB with 42.5 GB" in caplog.text and "cluster.gpu_constraint" in caplog.text
    assert "1 micro-batch with gradient checkpointing instead of 2 micro-batches" in caplog.text
    # a small model's plan already fits the smaller card: kept as it is
    small = plans["ettin-17m", "pointwise"]
    assert fit_plan(small, A100_40, 80, replan(paper, "ettin-17m", "pointwise")) == small


def test_a_card_too_small_stops_the_job_naming_the_card_its_memory_and_the_fix(paper) -> None:
    plan = memory_plans(paper)["ettin-1b", "pointwise"]
    with pytest.raises(GpuTooSmall) as stopped:
        fit_plan(plan, T4, 80, replan(paper, "ettin-1b", "pointwise"), "ettin-1b__pointwise__full__s42")
    message = str(stopped.value)
    assert "ettin-1b__pointwise__full__s42: the job got a Tesla T4 with 15.8 GB" in message
    assert "planned for a 80 GB GPU (gpu_memory_gb)" in message
    assert "set cluster.gpu_constraint" in message and "cluster.gpu_partition" in message


def test_jobs_read_the_planned_card_from_the_environment_the_workflow_sets(monkeypatch) -> None:
    monkeypatch.delenv(gpu_fit.PLANNED_GPU_ENV, raising=False)
    assert gpu_fit.planned_gpu() == (None, None)
    monkeypatch.setenv(gpu_fit.PLANNED_GPU_ENV, gpu_fit.planned_gpu_json(80, "NVIDIA H100 SXM5 80GB"))
    assert gpu_fit.planned_gpu() == (80, "NVIDIA H100 SXM5 80GB")
    assert json.loads(gpu_fit.planned_gpu_json(None, None)) == {"memory_gb": None, "name": None}
    # on a CPU the plan is the workflow's, and no device is asked for
    plan = object()
    assert gpu_fit.checked_plan(plan, "cpu", lambda *a: pytest.fail("re-planned"), ("run",)) is plan


def test_the_log_line_says_whether_the_card_is_the_planned_one() -> None:
    assert "(as planned)" in gpu_report(H100, 80, "NVIDIA H100 80GB HBM3")
    assert "not the planned card" in gpu_report(A100_40, 80, "NVIDIA H100 SXM5 80GB")
