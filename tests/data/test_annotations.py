"""The data-size axis: nested query subsets, run ids, schedules, checks, fitted points."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml
from conftest import REPO
from snakemake.utils import update_config

from rerank_scaling.data.annotations import TooShortToSplit, ict_groups, ict_pointwise
from rerank_scaling.data.subsets import annotated_pairs, nested_subset, subset_examples, subset_size
from rerank_scaling.grid import Grid, RunSpec
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import prepare, splits_for
from rerank_scaling.laws.synthetic import synthetic_metrics_table
from rerank_scaling.planning.annotation_prices import data_price
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.registries.objectives import StepSettings, total_steps
from rerank_scaling.settings import with_defaults
from rerank_scaling.workflow.load import ConfigError, validate_config

QIDS = [f"q{i:03d}" for i in range(200)]


@pytest.fixture
def tiny_config(default_config) -> dict:
    """tests/configs/tiny.yaml merged over config.yaml, as Snakemake merges them."""
    update_config(default_config, yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text()))
    return default_config


def test_subsets_are_nested_seeded_and_sized():
    for seed in (0, 13):
        subsets = [nested_subset(QIDS, f, seed) for f in (0.125, 0.25, 0.5, 1.0)]
        assert [len(s) for s in subsets] == [25, 50, 100, 200]
        assert all(small < large for small, large in zip(subsets, subsets[1:], strict=False))
    assert nested_subset(QIDS, 0.25, 0) != nested_subset(QIDS, 0.25, 13)  # each seed its own draw
    assert nested_subset(reversed(QIDS), 0.25, 0) == nested_subset(QIDS, 0.25, 0)  # not input order
    assert subset_size(7, 0.1) == 1 and subset_size(8, 0.25) == 2
    with pytest.raises(ValueError, match=r"not in \(0, 1\]"):
        subset_size(10, 0.0)


def test_examples_keep_whole_queries_and_count_their_judged_pairs():
    pointwise = pd.DataFrame({"qid": ["a"] * 4 + ["b"] * 2, "label": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]})
    assert annotated_pairs(pointwise) == 3
    half = subset_examples(pointwise, 0.5, 0)
    assert half["qid"].nunique() == 1 and len(half) == (pointwise["qid"] == half["qid"][0]).sum()
    groups = pd.DataFrame({"qid": ["a", "a", "b"], "labels": [[1.0, 0.0]] * 3})
    assert annotated_pairs(groups) == 3


def test_run_ids_of_full_data_runs_are_unchanged_and_fractions_round_trip():
    assert RunSpec("L2", "listwise", "full", 13).run_id == "L2__listwise__full__s13"
    for fraction in (0.125, 0.5, 1 / 3):
        spec = RunSpec("L2", "listwise", "full", 13, fraction)
        assert spec.run_id.startswith("L2__listwise__full__s13__d")
        assert RunSpec.parse(spec.run_id) == spec


def test_adding_a_fraction_only_adds_runs(default_config):
    before = Grid.from_config(default_config).run_ids()
    config = copy.deepcopy(default_config)
    config["training"]["data_fractions"] = [0.5, 1.0]
    after = Grid.from_config(config).run_ids()
    assert set(before) < set(after)
    assert {RunSpec.parse(r).data_fraction for r in set(after) - set(before)} == {0.5}


def _training(**values: object) -> StepSettings:
    """The step keys of a training section: ``values``, the schema's defaults for the rest."""
    return StepSettings.of(**{"objectives": ("pointwise",), "checkpoints": 5, **values})


def test_each_fraction_has_a_complete_schedule_of_its_own_length():
    epochs = _training(epochs=2.0)
    assert [total_steps(epochs, rows, 16, 1.0) for rows in (160, 80, 17)] == [20, 10, 4]
    fixed = _training(max_steps=10)
    assert [total_steps(fixed, 1000, 16, f) for f in (1.0, 0.5, 0.25)] == [10, 5, 3]


def _problems(config: dict) -> str:
    with pytest.raises(ConfigError) as error:
        validate_config(config)
    return str(error.value)


def test_config_checks_name_the_fraction_and_the_numbers(tiny_config):
    config = copy.deepcopy(tiny_config)
    config["training"]["data_fractions"] = [0.25, 1.0]  # max_steps 10 -> 3 steps < 5 checkpoints
    message = _problems(config)
    assert "training.data_fractions[0]" in message and "3 optimizer steps" in message
    assert "training.checkpoints = 5" in message
    config["training"]["data_fractions"] = [0.5]
    assert "has no 1.0" in _problems(config)
    config["training"]["data_fractions"] = [1.5, 1.0]
    assert "training.data_fractions[0]" in _problems(config)
    config = copy.deepcopy(tiny_config)
    config["fitting"]["data_axis"] = "fractions"
    assert "at least two fractions" in _problems(config)
    config["training"]["data_fractions"] = [0.5, 1.0]
    validate_config(config)


def fraction_table(fractions=(0.25, 0.5, 1.0)) -> pd.DataFrame:
    """A synthetic metrics table with one run per (model, fraction): 5 checkpoints over its own steps."""
    frames = []
    for fraction in fractions:
        table = synthetic_metrics_table(
            checkpoints=5, steps=(10 * fraction, 1000 * fraction), metrics=("nDCG@10",)
        )
        suffix = "" if fraction == 1.0 else f"__d{fraction!r}"
        frames.append(table.assign(run=table["run"] + suffix, data_fraction=fraction))
    return pd.concat(frames, ignore_index=True)


def test_the_data_law_fits_on_fraction_ends_or_on_checkpoints():
    table = fraction_table()
    checkpoints = prepare(table, FitSettings.of())
    assert sorted(checkpoints["step"].unique()) == sorted(
        table[table["data_fraction"] == 1.0]["step"].unique()
    )
    fractions = FitSettings.of(data_axis="fractions")
    ends = prepare(table, fractions)
    assert sorted(ends["step"].unique()) == [250.0, 500.0, 1000.0]
    group = ends[(ends["objective"] == "listwise") & (ends["split"] == "dev")]
    model = group["model"].iloc[0]
    label, fit, held = next(s for s in splits_for("data", group, fractions) if s[0] == f"data:{model}")
    assert sorted(fit["step"]) == [250.0, 500.0] and list(held["step"]) == [1000.0]
    _, fit, held = next(splits_for("model", group, fractions))
    assert set(fit["step"]) == {1000.0}  # the model law: the full-data run's end


PASSAGE = (
    "The bridge opened in 1932 after years of work. It carries eight lanes of traffic. Ferries stopped soon."
)


def test_ict_makes_one_pseudo_query_per_judged_positive_and_keeps_its_negatives():
    groups = pd.DataFrame(
        {
            "qid": ["q1", "q2"],
            "query": ["harbour bridge", "short"],
            "docids": [["d1", "n1"], ["d2", "n2"]],
            "documents": [[PASSAGE, "a negative"], ["Too short.", "another"]],
            "labels": [[1.0, 0.0], [1.0, 0.0]],
        }
    )
    ict, dropped = ict_groups(groups, seed=0)
    assert dropped == 1 and list(ict["qid"]) == ["q1"]  # one sentence cannot be split
    query, positive = ict["query"][0], ict["documents"][0][0]
    assert query in PASSAGE and query not in positive and len(query.split()) >= 4
    assert len(positive) < len(PASSAGE)
    assert list(ict["documents"][0][1:]) == ["a negative"] and list(ict["docids"][0]) == ["d1", "n1"]
    pointwise = pd.DataFrame(
        {
            "qid": ["q1"] * 3,
            "docid": ["d1", "n1", "n2"],
            "query": ["harbour bridge"] * 3,
            "document": [PASSAGE, "neg one", "neg two"],
            "label": [1.0, 0.0, 0.0],
        }
    )
    rows, _ = ict_pointwise(pointwise, seed=0)
    assert set(rows["query"]) == {query}  # the same passage gives the same sentence in both
    assert rows["document"][0] == positive and list(rows["document"][1:]) == ["neg one", "neg two"]


def test_ict_refuses_passages_too_short_to_split_naming_the_field():
    groups = pd.DataFrame(
        {
            "qid": ["q"],
            "query": ["x"],
            "docids": [["d"]],
            "documents": [["One sentence only"]],
            "labels": [[1.0]],
        }
    )
    with pytest.raises(TooShortToSplit, match="training.annotations"):
        ict_groups(groups, seed=0)


def test_annotation_prices_become_a_price_per_example_per_source():
    metrics = pd.DataFrame(
        {
            "run": ["h", "h", "i"],
            "annotations": ["human", "human", "ict"],
            "objective": ["listwise"] * 3,
            "checkpoint": [1, 2, 2],
            "examples": [40, 80, 80],
            "annotated_pairs": [20, 20, 20],
        }
    )
    priced = PlanSettings.of(z_data=1e-5, annotation_cost_per_pair={"human": 0.6, "ict": 0.0})
    assert data_price(priced, metrics, "human", "listwise") == pytest.approx(0.6 * 20 / 80)
    assert data_price(priced, metrics, "ict", "listwise") == 0.0
    assert data_price(PlanSettings.of(z_data=1e-5), metrics, "human", "listwise") == 1e-5


def test_the_data_figure_draws_checkpoints_and_fraction_ends_on_one_axis():
    from rerank_scaling.report.figures import data_scaling

    table = fraction_table()
    fig = data_scaling(table, pd.DataFrame(), "nDCG@10", "dev")
    ends = [line for line in fig.axes[0].lines if line.get_linestyle() == "--" and len(line.get_xdata()) == 3]
    assert ends and all(sorted(line.get_xdata()) == [250.0, 500.0, 1000.0] for line in ends)
    checkpoint_steps = sorted(set(table.loc[table["data_fraction"] == 1.0, "step"]))
    scattered = {x for c in fig.axes[0].collections for x, _ in c.get_offsets()}
    assert set(checkpoint_steps) <= scattered


def test_the_budget_buys_more_examples_of_the_cheaper_source():
    """Eq. 11 per source: one joint law, two sources; with priced human pairs and free ICT pairs
    the same budget affords about 140x more ICT examples here, and only the human plan pays for data
    (the synthetic law's compute is cheap: a budget both can spend inside the validated range)."""
    from synthetic_runs import SCRATCH, joint_fit_rows
    from synthetic_runs import synthetic_metrics_table as metrics_table

    from rerank_scaling.planning.forecast import run_stats
    from rerank_scaling.planning.plan_rows import make_plan
    from rerank_scaling.planning.plan_table import plan_table

    human = metrics_table(noise=0.0)
    human = human.assign(annotations="human", annotated_pairs=human["examples"].max() / 4)
    metrics = pd.concat([human, human.assign(annotations="ict")], ignore_index=True)
    fits = joint_fit_rows({"pointwise": ("ok", "")})
    fits = pd.concat([fits, fits.assign(annotations="ict")], ignore_index=True)
    prices = {"human": 1e-6, "ict": 0.0}
    settings = PlanSettings.of(profile=False, budgets=(3.16e-5,), annotation_cost_per_pair=prices)
    models = with_defaults("models", [{**SCRATCH, "name": name} for name in ("s1", "s3", "s5")])
    plan = make_plan(
        metrics,
        fits,
        models,
        [],
        settings,
        FitSettings.of(),
        "cpu",
        20,
        run_stats(metrics, with_defaults("training", {"max_length": 256})),
    )
    budget = plan_table(plan.rows).query("kind == 'budget' and status == 'ok'")
    cost = budget.groupby("annotations")[["cost_data", "examples"]].max()
    assert cost.loc["ict", "cost_data"] == 0.0 and cost.loc["human", "cost_data"] > 0
    assert cost.loc["ict", "examples"] > 100 * cost.loc["human", "examples"]


def test_the_fraction_check_fails_only_when_no_draw_has_the_steps():
    from rerank_scaling.data.fraction_check import fraction_problems, most_rows

    # 8 queries: one with 9 groups, seven with 1; a quarter keeps 2 queries: at most 10 rows
    groups = pd.DataFrame({"qid": ["big"] * 9 + [f"q{i}" for i in range(7)], "labels": [[1.0]] * 16})
    assert most_rows(groups, 0.25) == 10 and most_rows(groups, 0.5) == 12
    settings = _training(objectives=("listwise",), group_queries_per_batch=2, checkpoints=6)
    # a half: 6 steps if "big" is drawn (a draw without it: the train job names its own shortfall)
    assert fraction_problems(0.5, {"groups": groups}, settings) == []
    (problem,) = fraction_problems(0.25, {"groups": groups}, settings)  # at most 10 rows: 5 steps
    assert "training.data_fractions" in problem and "fraction 0.25 gives listwise runs at most 5" in problem


def _file_source(tmp_path, name="gen", qrels=("g1 0 d0 2", "g2 0 d2 2")) -> dict:
    """A generated-query source over bad_inputs' local collection (documents d0..d11)."""
    (tmp_path / f"{name}.tsv").write_text("g1\triver bridge notes\ng2\tcastle forest notes\n")
    (tmp_path / f"{name}.txt").write_text("".join(f"{line}\n" for line in qrels))
    return {
        "queries": str(tmp_path / f"{name}.tsv"),
        "qrels": str(tmp_path / f"{name}.txt"),
        "provenance": "test: hand-written stand-ins for docT5query output",
    }


def test_file_sources_are_named_have_files_and_a_price(tiny_config, tmp_path):
    config = copy.deepcopy(tiny_config)
    config["training"]["annotations"] = ["human", "file"]
    message = _problems(config)
    assert "training.annotations[1]" in message and "training.annotation_files" in message
    config["training"]["annotations"] = ["human", "gen"]
    config["training"]["annotation_files"] = {
        "gen": {**_file_source(tmp_path), "qrels": str(tmp_path / "no.txt")}
    }
    message = _problems(config)
    assert "training.annotation_files.gen.qrels" in message and "no.txt is not a file" in message
    config["training"]["annotation_files"] = {"gen": _file_source(tmp_path)}
    config["planning"] = {"annotation_cost_per_pair": {"human": 0.6}}
    message = _problems(config)
    assert (
        "planning.annotation_cost_per_pair" in message and "no price for annotation source 'gen'" in message
    )
    config["planning"] = {"annotation_cost_per_pair": {"human": 0.6, "gen": 0.01}}
    config["training"]["annotation_files"] = {"gen": _file_source(tmp_path, qrels=("g1 0 d0 1", "g2 0 d2 1"))}
    message = _problems(config)  # tiny.yaml: examples.positive_threshold 2
    assert "training.annotation_files.gen.qrels" in message and "grades found: {1: 2}" in message
    config["training"]["annotation_files"] = {"gen": _file_source(tmp_path)}
    validate_config(config)  # builtin corpus: its passages are checked by the annotation_file job
    config["training"]["annotation_files"] = {"dev": _file_source(tmp_path, "dev")}
    config["training"]["annotations"] = ["human", "dev"]
    config["planning"] = {}
    assert "'dev' is also a split of the dataset" in _problems(config)
    config["training"]["annotations"] = ["human", "d0.5"]  # would read as a data fraction in run ids
    assert "training.annotations[1]" in _problems(config)


def test_file_sources_are_runs_of_their_own_and_their_ids_round_trip(tiny_config, tmp_path):
    config = copy.deepcopy(tiny_config)
    before = set(Grid.from_config(config).run_ids())
    config["training"].update(annotations=["human", "doct5query"], data_fractions=[0.5, 1.0])
    config["training"]["annotation_files"] = {"doct5query": _file_source(tmp_path)}
    after = Grid.from_config(config).run_ids()
    assert before < set(after)
    for run in after:
        assert RunSpec.parse(run).run_id == run
    sources = {RunSpec.parse(run).annotations for run in after}
    assert sources == {"human", "doct5query"}
    assert RunSpec.parse("L1__listwise__full__s13__d0.5__doct5query").data_fraction == 0.5


def test_file_passages_not_in_the_corpus_fail_at_parse_time_naming_file_and_line(tiny_config, tmp_path):
    from bad_inputs import local_section, write_local

    config = copy.deepcopy(tiny_config)
    config["dataset"] = local_section(write_local(tmp_path / "local"))
    config["training"]["annotations"] = ["human", "gen"]
    config["training"]["annotation_files"] = {
        "gen": _file_source(tmp_path, qrels=("g1 0 d0 2", "g2 0 ghost 2"))
    }
    message = _problems(config)
    assert f"{tmp_path / 'gen.txt'}:2: passage 'ghost' is not in the collection's corpus.jsonl" in message
    assert "1 of 2 judgements" in message and "remove those lines" in message
    config["training"]["annotation_files"] = {"gen": _file_source(tmp_path, qrels=("g1 0 d0 2", "g9 0 d2 2"))}
    assert f"{tmp_path / 'gen.txt'}:2: query 'g9' is not in" in _problems(config)
    config["training"]["annotation_files"] = {"gen": _file_source(tmp_path)}
    config["fitting"]["metrics"] = ["nDCG@10"]
    validate_config(config)


def test_a_file_source_becomes_examples_with_the_human_builder_and_records_provenance(tmp_path):
    """The annotation_file stage writes the source as a split of the run's collection; the human
    examples' builder (build_examples) turns it into examples over the same corpus and BM25 run."""
    import json

    from bad_inputs import build_examples, write_local

    from rerank_scaling.data import annotation_files
    from rerank_scaling.data import build_examples as stage

    build_examples(
        tmp_path, write_local(tmp_path / "local"), {"pointwise_negatives": 2, "group_negatives": 2}
    )
    collection = tmp_path / "data" / "collection"
    source = _file_source(tmp_path)
    argv = ["--source", "gen", "--queries", source["queries"], "--qrels", source["qrels"]]
    argv += ["--provenance", source["provenance"], "--corpus", str(collection / "corpus.jsonl")]
    annotation_files.main([*argv, "--collection", str(collection), "--record", str(tmp_path / "prov.json")])
    record = json.loads((tmp_path / "prov.json").read_text())
    assert record["provenance"] == source["provenance"] and (record["queries"], record["judgements"]) == (
        2,
        2,
    )
    assert len(record["files"]["qrels"]["sha256"]) == 64
    run = tmp_path / "gen.trec"  # a BM25-like run ranking every document, as bad_inputs' human one
    run.write_text("".join(f"{q} Q0 d{i} {i + 1} {20 - i} bm25\n" for q in ("g1", "g2") for i in range(12)))
    argv = ["--collection", str(collection), "--split", "gen", "--run", str(run), "--settings"]
    argv += [json.dumps({"pointwise_negatives": 2, "group_negatives": 2})]
    stage.main(
        [*argv, "--pointwise", str(tmp_path / "gpw.parquet"), "--groups", str(tmp_path / "ggr.parquet")]
    )
    groups = pd.read_parquet(tmp_path / "ggr.parquet").set_index("qid")
    assert dict(groups["query"]) == {"g1": "river bridge notes", "g2": "castle forest notes"}
    assert [docids[0] for docids in groups.loc[["g1", "g2"], "docids"]] == [
        "d0",
        "d2",
    ]  # its qrels' positives
    human = pd.read_parquet(tmp_path / "gr.parquet")
    assert list(groups.reset_index().columns) == list(human.columns)  # one schema for every source
    bad = _file_source(tmp_path, qrels=("g1 0 d0 2", "g2 0 ghost 2"))
    argv = ["--source", "gen", "--queries", bad["queries"], "--qrels", bad["qrels"], "--provenance", "x"]
    argv += ["--corpus", str(collection / "corpus.jsonl"), "--collection", str(tmp_path / "other")]
    with pytest.raises(SystemExit, match=r"gen.txt:2: passage 'ghost' is not in"):
        annotation_files.main([*argv, "--record", str(tmp_path / "other.json")])
    assert not (tmp_path / "other").exists()  # nothing written for a source that failed its check
