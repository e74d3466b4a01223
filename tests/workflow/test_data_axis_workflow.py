"""The data axes through the real Snakemake DAG: a tiny grid of five data fractions x three
annotation sources (human, ict, and a generated-query file source), each run on a nested subset with
its own complete schedule; adding a fraction plans only its runs; the data law fitted on the fraction
ends, per source; the planner prices each source's annotations."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, job_table, snakemake_command, workflow_env

pytestmark = pytest.mark.slow

FRACTIONS = [0.2, 0.4, 0.6, 0.8, 1.0]  # 4 fitted points for power_S's 3 parameters, 1 held out


PROVENANCE = "test stand-in for docT5query: the first 8 words of each train query's grade-2 passage"
PRICES = {"human": 0.6, "ict": 0.0, "gen": 0.01}


def write_generated_queries(config: dict, out: Path) -> dict:
    """A generated-query source over the builtin corpus (training.annotation_files entry): one query
    per train query's most relevant passage, its first 8 words (a stand-in for docT5query output)."""
    from rerank_scaling.data.collection import load_texts, read_split
    from rerank_scaling.data.datasets import materialise_dataset

    collection = materialise_dataset(config["dataset"], out / "collection")
    _, qrels = read_split(collection.root, config["dataset"]["train_split"])
    texts = load_texts(collection.corpus)
    best = {qid: max(docs, key=docs.get) for qid, docs in sorted(qrels.items())}
    (out / "gen.tsv").write_text(
        "".join(f"g{q}\t{' '.join(texts[d].split()[:8])}\n" for q, d in best.items())
    )
    (out / "gen.txt").write_text("".join(f"g{q} 0 {d} 2\n" for q, d in best.items()))
    return {"queries": str(out / "gen.tsv"), "qrels": str(out / "gen.txt"), "provenance": PROVENANCE}


def axis_config(workdir: Path) -> dict:
    """tests/configs/tiny.yaml cut to one size, objective and attention, with the data axes."""
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["run_name"] = "axes"
    config["models"] = config["models"][:1]
    config["training"].update(
        objectives=["listwise"],
        attention=["full"],
        data_fractions=FRACTIONS,
        annotations=["human", "ict", "gen"],
        max_steps=15,
        checkpoints=3,
    )
    generated = workdir / "generated"
    if not (generated / "gen.txt").exists():
        generated.mkdir(exist_ok=True)
        write_generated_queries(config, generated)
    config["training"]["annotation_files"] = {
        "gen": {
            "queries": str(generated / "gen.tsv"),
            "qrels": str(generated / "gen.txt"),
            "provenance": PROVENANCE,
        }
    }
    config["fitting"].update(data_axis="fractions", last_k=1)
    config["planning"] = {"annotation_cost_per_pair": PRICES, "profile": False}
    return config


def snakemake(workdir: Path, configfile: str, *args: str) -> subprocess.CompletedProcess:
    command = snakemake_command(workdir, configfile, "--cores", "2", *args)
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=workflow_env())


@pytest.fixture(scope="module")
def workflow(module_dir) -> Path:
    workdir = copy_workflow(module_dir / "axes")
    (workdir / "axes.yaml").write_text(yaml.safe_dump(axis_config(workdir)))
    result = snakemake(workdir, "axes.yaml")
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return workdir


def sidecars(workdir: Path) -> pd.DataFrame:
    paths = (workdir / "results" / "axes" / "checkpoints").glob("*/ckpt-*/checkpoint.json")
    return pd.DataFrame([json.loads(path.read_text()) for path in paths])


def test_each_fraction_trains_a_complete_schedule_of_its_own(workflow):
    cars = sidecars(workflow)
    for source, runs in cars.groupby("annotations"):
        final = runs[runs["step"] == runs["total_steps"]].set_index("data_fraction").sort_index()
        assert list(final.index) == FRACTIONS, source
        assert list(final["total_steps"]) == [3, 6, 9, 12, 15]  # max_steps 15 x fraction
        assert (final["learning_rate"] == 0.0).all()  # every schedule decayed to its own end
        assert (runs.loc[runs["step"] < runs["total_steps"], "learning_rate"] > 0).all()
        pairs = list(final["annotated_pairs"])
        assert pairs == sorted(pairs) and len(set(pairs)) == len(pairs)
    human = cars[(cars["annotations"] == "human") & (cars["step"] == cars["total_steps"])]
    # 24 builtin train queries, one judged pair each: ceil(f x 24) of them
    assert sorted(human["annotated_pairs"]) == [5, 10, 15, 20, 24]
    metrics = pd.read_parquet(workflow / "results" / "axes" / "metrics" / "all.parquet")
    trained = metrics[metrics["family"] != "bm25"]
    assert set(trained["annotations"]) == {"human", "ict", "gen"}
    assert trained.groupby(["annotations", "data_fraction"])["annotated_pairs"].nunique().eq(1).all()


def test_ict_annotations_share_queries_and_passages_and_record_provenance(workflow):
    examples = workflow / "results" / "axes" / "examples"
    human, ict = (pd.read_parquet(examples / d / "groups.parquet") for d in (".", "ict"))
    paired = ict.merge(human, on="qid", suffixes=("_ict", "_human"))
    assert len(paired) == len(ict) > 0.8 * len(human)
    assert (paired["query_ict"] != paired["query_human"]).all()
    for query, ict_docs, human_docs in zip(
        paired["query_ict"], paired["documents_ict"], paired["documents_human"], strict=True
    ):
        assert query in human_docs[0] and query not in ict_docs[0]  # a sentence of the positive
        assert list(ict_docs[1:]) == list(human_docs[1:])  # the same BM25 negatives
    provenance = json.loads((examples / "ict" / "provenance.json").read_text())
    assert provenance["source"] == "ict" and provenance["pairs"]["groups"] == len(ict)


def test_a_file_source_trains_on_its_own_queries_and_records_their_provenance(workflow):
    from rerank_scaling.data.collection import read_queries
    from rerank_scaling.data.trec import read_qrels

    results = workflow / "results" / "axes"
    generated = read_queries(workflow / "generated" / "gen.tsv")  # the texts contain quotes: the
    judged = read_qrels(workflow / "generated" / "gen.txt")  # pipeline's own readers, not read_csv
    groups = pd.read_parquet(results / "examples" / "gen" / "groups.parquet")
    human = pd.read_parquet(results / "examples" / "groups.parquet")
    assert len(groups) == len(judged) == len(human)  # one generated query per judged passage
    for qid, query, docids in zip(groups["qid"], groups["query"], groups["docids"], strict=True):
        assert query == generated[qid]
        assert list(judged[qid]) == [docids[0]] and docids[0] not in docids[1:]  # its qrels' positive
    provenance = json.loads((results / "examples" / "gen" / "provenance.json").read_text())
    assert provenance["provenance"] == PROVENANCE and provenance["judgements"] == len(judged)
    cars = sidecars(workflow)
    final = cars[(cars["annotations"] == "gen") & (cars["step"] == cars["total_steps"])]
    assert sorted(final["annotated_pairs"]) == [5, 10, 15, 20, 24]  # ceil(f x 24) generated pairs


def test_the_data_law_is_fitted_on_the_fraction_ends_per_source(workflow):
    laws = workflow / "results" / "axes" / "laws"
    fits = pd.read_parquet(laws / "fits.parquet")
    data = fits[(fits["protocol"] == "data") & (fits["law"] == "power_S")]
    assert set(data["annotations"]) == {"human", "ict", "gen"}
    assert set(data["status"]) <= {"ok", "degenerate"}, data[["status", "reason"]]
    assert (data["n_fit"] == 4).all() and (data["n_held_out"] == 1).all()
    forecasts = pd.read_parquet(laws / "forecasts.parquet")
    points = forecasts[(forecasts["protocol"] == "data") & (forecasts["law"] == "power_S")]
    for _, rows in points.groupby(["annotations", "split"]):
        assert sorted(rows["step"]) == [3, 6, 9, 12, 15]  # the fraction ends, not checkpoints
        assert list(rows.loc[rows["held_out"], "step"]) == [15]


def test_the_planner_prices_annotations_per_source(workflow):
    from rerank_scaling.planning.annotation_prices import data_price
    from rerank_scaling.planning.plan_settings import PlanSettings

    results = workflow / "results" / "axes"
    metrics = pd.read_parquet(results / "metrics" / "all.parquet")
    settings = PlanSettings.of(annotation_cost_per_pair=PRICES)
    human = data_price(settings, metrics, "human", "listwise")
    assert 0 < human < 0.6  # a pair is behind fewer than one example seen (negatives, passes)
    assert data_price(settings, metrics, "ict", "listwise") == 0.0
    assert 0 < data_price(settings, metrics, "gen", "listwise") < 0.01
    plan = pd.read_parquet(results / "planning" / "plan.parquet")
    assert set(plan.loc[plan["kind"] == "budget", "annotations"]) == {"human", "ict", "gen"}


def test_adding_a_fraction_plans_only_its_runs(workflow):
    config = axis_config(workflow)
    config["training"]["data_fractions"] = [0.3, *FRACTIONS]
    (workflow / "more.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(workflow, "more.yaml", "-n", "--quiet", "rules")
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_table(result.stdout + result.stderr)
    assert jobs["train"] == jobs["evaluate_run"] == jobs["fraction_check"] == 3, jobs  # one per source
    assert jobs["training_examples"] == jobs["annotation_examples"] == jobs["bm25_search"] == 0, jobs
    assert jobs["annotation_file"] == jobs["file_examples"] == 0, jobs
