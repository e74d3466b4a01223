"""Bad data fail where they enter (prepare_data, the examples job, the TREC readers), naming file:line.

Each case writes a small local collection (or run file) with one defect and runs the stage entry
point the workflow runs; the workflow-level tests at the end run `snakemake` on such a collection.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from bad_inputs import DOCS, QRELS, QUERIES, build_examples, local_section, prepare, write_local
from conftest import REPO, copy_workflow, snakemake_command, workflow_env

from rerank_scaling.data.trec import read_qrels, read_run

BAD_DATA = [
    pytest.param(
        {"corpus": [*DOCS[:2], '{"id": "d2", "contents": "unclosed', *DOCS[3:]]},
        "corpus.jsonl:3: expected a JSON object",
        id="malformed-jsonl",
    ),
    pytest.param(
        {"corpus": [*DOCS[:2], '{"id": "d2"}', *DOCS[3:]]},
        "corpus.jsonl:3: expected a JSON object with 'id' and 'contents'",
        id="jsonl-missing-field",
    ),
    pytest.param(
        {"corpus": [*DOCS, DOCS[5]]}, "corpus.jsonl:13: duplicate document id 'd5'", id="duplicate-docid"
    ),
    pytest.param(
        {"queries": {"train": [*QUERIES["train"], "t1\tagain"]}},
        "queries/train.tsv:4: duplicate query id 't1'",
        id="duplicate-qid",
    ),
    pytest.param(
        {"queries": {"train": ["t1 river bridge"]}},
        "queries/train.tsv:1: expected 'qid<TAB>query text'",
        id="malformed-tsv",
    ),
    pytest.param(
        {"qrels": {"train": ["t1 0 d0 high"]}},
        "qrels/train.txt:1: relevance 'high' is not an integer",
        id="qrels-grade",
    ),
    pytest.param(
        {"qrels": {"train": ["t1 0 d0"]}}, "qrels/train.txt:1: expected 4 fields", id="qrels-fields"
    ),
    pytest.param(
        {"qrels": {"train": [*QRELS["train"], "t1 0 d0 1"]}},
        "qrels/train.txt:4: duplicate judgement of document 'd0'",
        id="duplicate-qrel",
    ),
    pytest.param({"queries": {"dev": []}}, "queries/dev.tsv: split 'dev' has no queries", id="empty-split"),
    pytest.param(
        {"queries": {"dev": ["v1\t"]}}, "queries/dev.tsv:1: query 'v1' has no text", id="empty-query"
    ),
    pytest.param(
        {"queries": {"train": [*QUERIES["train"][:1], "t2\t  \t ", *QUERIES["train"][2:]]}},
        "queries/train.tsv:2: query 't2' has no text (empty or whitespace only)",
        id="whitespace-query",
    ),
    pytest.param(
        {"queries": {"dev": ["\ufeffv1\tvalley meadow"]}},
        "queries/dev.tsv:1: the file starts with a UTF-8 byte-order mark",
        id="bom",
    ),
    pytest.param(
        {"qrels": {"dev": ["v1 0 d6 0", "v1 0 d7 0"]}},
        "qrels/dev.txt: split 'dev' has no judgement with grade >= evaluation.relevance_threshold = 1 "
        "(grades found: {0: 2})",
        id="no-relevant-judgement",
    ),
    pytest.param({"qrels": {"dev": []}}, "qrels/dev.txt: split 'dev' has no judgements", id="no-judgements"),
    pytest.param(
        {"qrels": {"train": [*QRELS["train"], "t1 0 ghostdoc 2"]}},
        "1 of 4 judgements (25.0%) name unknown ids: 1 name documents not in corpus.jsonl ('ghostdoc')",
        id="unknown-document",
    ),
    pytest.param(
        {"qrels": {"dev": [*QRELS["dev"], "v9 0 d1 1"]}},
        "1 of 2 judgements (50.0%) name unknown ids: 1 name queries not in queries/dev.tsv ('v9')",
        id="unknown-query",
    ),
]


DEV_IN_TRAIN = {  # the dev split appended to train, its qrels too
    "queries": {"train": [*QUERIES["train"], *QUERIES["dev"]]},
    "qrels": {"train": [*QRELS["train"], *QRELS["dev"]]},
}
TEST_IS_DEV = {"queries": {"test": QUERIES["dev"]}, "qrels": {"test": QRELS["dev"]}}
BAD_IDS_AND_SPLITS = [
    pytest.param(
        {"corpus": [*DOCS[:3], '{"id": "d 3", "contents": "harbour"}', *DOCS[4:]]},
        "corpus.jsonl:4: document id 'd 3' contains whitespace",
        {},
        id="space-in-docid",
    ),
    pytest.param(
        {"corpus": [*DOCS[:3], '{"id": "d\\t3", "contents": "harbour"}', *DOCS[4:]]},
        "corpus.jsonl:4: document id 'd\\t3' contains whitespace",
        {},
        id="tab-in-docid",
    ),
    pytest.param(
        {"queries": {"dev": ["v 1\tvalley meadow"]}, "qrels": {"dev": ["v 1 0 d6 2"]}},
        "queries/dev.tsv:1: query id 'v 1' contains whitespace",
        {},
        id="space-in-qid",
    ),
    pytest.param(
        DEV_IN_TRAIN,
        "queries/train.tsv:4: query 'v1' is also in split 'dev' (",
        {},
        id="dev-appended-to-train",
    ),
    pytest.param(
        {"queries": {"train": [*QUERIES["train"][:2], "t3\tValley   MEADOW"]}},
        "queries/train.tsv:3: query 't3' is also in split 'dev' (",
        {},
        id="same-text-other-id",
    ),
    pytest.param(
        TEST_IS_DEV,
        "queries/dev.tsv:1: query 'v1' is also in split 'test' (",
        {"eval_splits": ["dev", "test"]},
        id="test-identical-to-dev",
    ),
]


@pytest.mark.parametrize(("defect", "message"), BAD_DATA)
def test_bad_data_stop_prepare_data_naming_file_and_line(tmp_path, defect, message):
    root = write_local(tmp_path / "local", **defect)
    with pytest.raises(SystemExit) as err:
        prepare(tmp_path, root)
    assert message in str(err.value), err.value
    assert str(root) in str(err.value)


@pytest.mark.parametrize(("defect", "message", "extra"), BAD_IDS_AND_SPLITS)
def test_bad_ids_and_shared_queries_stop_prepare_data_naming_file_and_line(tmp_path, defect, message, extra):
    root = write_local(tmp_path / "local", **defect)
    with pytest.raises(SystemExit) as err:
        prepare(tmp_path, root, **extra)
    assert message in str(err.value), err.value
    assert str(root) in str(err.value)


def test_deliberate_overlap_is_kept_counted_and_named_in_the_log(tmp_path, caplog):
    """dataset.allow_split_overlap: true: the shared queries stay, each split's count in checks.json."""
    root = write_local(tmp_path / "local", **DEV_IN_TRAIN)
    checks = prepare(tmp_path, root, allow_split_overlap=True)
    assert {row["split"]: row["shared_queries"] for row in checks["splits"]} == {"train": 1, "dev": 1}
    assert f"{root}/queries/train.tsv:4: query 'v1' is also in split 'dev'" in caplog.text
    clean = prepare(tmp_path / "clean", write_local(tmp_path / "clean-local"))
    assert [row["shared_queries"] for row in clean["splits"]] == [0, 0]


def test_an_empty_document_nobody_judges_relevant_passes(tmp_path, caplog):
    """Only a relevant judgement of an empty document is warned about (BM25 could never find it)."""
    corpus = [*DOCS[:6], '{"id": "d6", "contents": ""}', *DOCS[7:]]
    prepare(
        tmp_path, write_local(tmp_path / "local", corpus=corpus, qrels={"dev": ["v1 0 d7 2", "v1 0 d6 0"]})
    )
    assert "has no text" not in caplog.text


def test_a_judged_empty_document_stops_prepare_data_naming_file_line_and_the_opt_in(tmp_path):
    corpus = [*DOCS[:6], '{"id": "d6", "contents": "  "}', *DOCS[7:]]
    root = write_local(tmp_path / "local", corpus=corpus)
    with pytest.raises(SystemExit) as err:
        prepare(tmp_path, root)
    assert f"{root}/corpus.jsonl:7: document 'd6' has no text, but" in str(err.value), err.value
    assert "dataset.allow_judged_empty_documents: true" in str(err.value)


def test_allowed_judged_empty_documents_are_kept_warned_and_counted(tmp_path, caplog):
    """The opt-in real collections need (Cranfield's document 995): a warning naming file:line, the
    count in checks.json."""
    corpus = [*DOCS[:6], '{"id": "d6", "contents": "  "}', *DOCS[7:]]
    root = write_local(tmp_path / "local", corpus=corpus)
    checks = prepare(tmp_path, root, allow_judged_empty_documents=True)
    assert f"{root}/corpus.jsonl:7: document 'd6' has no text, but" in caplog.text
    assert {row["split"]: row["judged_empty_documents"] for row in checks["splits"]} == {"train": 0, "dev": 1}


def test_bytes_that_are_not_utf8_name_file_line_and_column(tmp_path):
    root = write_local(tmp_path / "local")
    (root / "qrels" / "train.txt").write_bytes("t1 0 d0 2\nt2 0 d2 2\nt3 0 caf\xe9 2\n".encode("latin-1"))
    with pytest.raises(SystemExit) as err:
        prepare(tmp_path, root)
    assert f"{root}/qrels/train.txt:3: not UTF-8 (byte 0xe9 at column 9)" in str(err.value), err.value


def test_a_bm25_run_missing_queries_is_an_error_naming_them(tmp_path):
    """Anserini exits 0 both when no term of a query is indexed and when it cannot read the topics
    (an empty query: "Unable to load topic reader"); either way the run lacks queries."""
    from rerank_scaling.data import bm25

    root = write_local(tmp_path / "local")
    bm25.build_index(root / "corpus.jsonl", tmp_path / "index")
    with pytest.raises(RuntimeError, match=r"no candidates for 1 of the 2 queries \('q2'\): no term"):
        bm25.search(tmp_path / "index", {"q1": "river bridge", "q2": "zzyzx"}, tmp_path / "run.trec")
    with pytest.raises(RuntimeError, match=r"2 of the 2 queries .*Unable to load topic reader"):
        bm25.search(tmp_path / "index", {"q1": "river bridge", "q2": ""}, tmp_path / "run.trec")
    assert not (tmp_path / "run.trec").exists(), "no run file is left under its final name"


def test_a_few_unknown_judgements_are_dropped_with_a_warning_and_counted(tmp_path, caplog):
    root = write_local(
        tmp_path / "local", qrels={"dev": [*QRELS["dev"], "v1 0 ghostdoc 1", "v1 0 d7 1", "v1 0 d8 1"]}
    )
    checks = prepare(tmp_path, root, max_unknown_qrels_share=0.3)
    assert "dev.txt: 1 of 4 judgements (25.0%) name unknown ids: 1 name documents" in caplog.text
    dev = [row for row in checks["splits"] if row["split"] == "dev"][0]
    assert (dev["judgements"], dev["unknown_documents"], dev["unknown_queries"]) == (4, 1, 0)
    assert dev["dropped_share"] == 0.25
    assert read_qrels(tmp_path / "data" / "collection" / "qrels" / "dev.txt") == {
        "v1": {"d6": 2, "d7": 1, "d8": 1}
    }
    assert read_qrels(root / "qrels" / "dev.txt")["v1"]["ghostdoc"] == 1, "the user's files are left alone"
    with pytest.raises(SystemExit, match="more than dataset.max_unknown_qrels_share = 0.2"):
        prepare(tmp_path / "again", root, max_unknown_qrels_share=0.2)


def test_a_run_file_with_a_non_numeric_score_names_file_and_line(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 high bm25\n")
    with pytest.raises(ValueError, match=r"run.trec:2: score 'high' is not a number"):
        read_run(run)
    run.write_text("q1 Q0 d1 1 3.5 bm25\nq1 Q0 d1 2 3.0 bm25\n")
    with pytest.raises(ValueError, match=r"run.trec:2: document 'd1' is ranked twice"):
        read_run(run)


def test_binary_qrels_with_the_default_threshold_name_positive_threshold_and_the_grades(tmp_path):
    binary = {"train": ["t1 0 d0 1", "t1 0 d1 0", "t2 0 d2 1", "t3 0 d4 1"]}
    root = write_local(tmp_path / "local", qrels=binary)
    with pytest.raises(SystemExit) as err:
        build_examples(
            tmp_path, root, {"positive_threshold": 2, "pointwise_negatives": 2, "group_negatives": 2}
        )
    message = str(err.value)
    assert "examples.positive_threshold = 2" in message and "{0: 1, 1: 3}" in message, message
    assert "Set examples.positive_threshold to at most 1" in message
    assert not (tmp_path / "pw.parquet").exists()


def test_too_few_negatives_name_the_negatives_setting(tmp_path):
    root = write_local(tmp_path / "local")
    with pytest.raises(SystemExit, match=r"fewer than examples.group_negatives = 20"):
        build_examples(
            tmp_path, root, {"pointwise_negatives": 2, "group_negatives": 20}, {"objectives": ["listwise"]}
        )


def test_the_examples_job_checks_the_steps_for_the_checkpoints(tmp_path):
    root = write_local(tmp_path / "local")
    training = {
        "objectives": ["pointwise", "listwise"],
        "checkpoints": 3,
        "pointwise_batch_size": 4,
        "group_queries_per_batch": 2,
    }
    # 3 queries x (1 + 2) = 9 pairs -> 3 steps of 4; 3 groups -> 2 steps of 2
    with pytest.raises(SystemExit) as err:
        build_examples(tmp_path, root, {"pointwise_negatives": 2, "group_negatives": 2}, training)
    message = str(err.value)
    assert (
        "'training.checkpoints': listwise training has 2 optimizer steps "
        "(3 rows / training.group_queries_per_batch 2" in message
    )
    assert "pointwise" not in message.split("listwise")[0], "pointwise has its 3 steps"
    build_examples(
        tmp_path / "ok", root, {"pointwise_negatives": 2, "group_negatives": 2}, {**training, "max_steps": 3}
    )


@pytest.mark.slow
def test_the_workflow_stops_in_prepare_data_on_bad_data_and_in_examples_on_binary_qrels(tmp_path):
    """`snakemake` on a local collection: a malformed corpus line stops prepare_data (no BM25 job
    runs); binary qrels with positive_threshold 2 stop the examples job (no training job runs)."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    copy_workflow(workdir)
    config = yaml.safe_load((REPO / "tests" / "configs" / "tiny.yaml").read_text())
    config["dataset"] = local_section(tmp_path / "local")
    config["retrieval"]["depth"] = 12
    config["examples"].update(negative_depth=12, pointwise_negatives=2, group_negatives=2)
    config["evaluation"]["rerank_depth"] = 8
    (workdir / "local.yaml").write_text(yaml.safe_dump(config))

    def snakemake() -> tuple[int, str]:
        command = snakemake_command(workdir, "local.yaml", "--cores", "1")
        result = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=workflow_env())
        return result.returncode, result.stdout + result.stderr

    write_local(tmp_path / "local", corpus=[*DOCS[:2], "not json", *DOCS[3:]])
    code, output = snakemake()
    log = (workdir / "results" / "tiny" / "logs" / "data" / "corpus.log").read_text()
    assert code != 0 and "corpus.jsonl:3: expected a JSON object" in log, output[-3000:]
    assert not (workdir / "results" / "tiny" / "bm25").exists()

    shutil.rmtree(tmp_path / "local")
    write_local(tmp_path / "local", qrels={"train": ["t1 0 d0 1", "t2 0 d2 1", "t3 0 d4 0"]})
    code, output = snakemake()
    log = (workdir / "results" / "tiny" / "logs" / "examples" / "build.log").read_text()
    assert code != 0 and "examples.positive_threshold = 2" in log and "{0: 1, 1: 2}" in log, output[-3000:]
    assert not (workdir / "results" / "tiny" / "logs" / "train").exists()
