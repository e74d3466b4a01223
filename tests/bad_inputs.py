"""The bad inputs users and probes found, and the message each now gets, by running the real checks.

``python tests/bad_inputs.py`` prints the table of the docs page "What a bad input gets"
(``docs/bad-inputs.md``), and ``python tests/bad_inputs.py docs/bad-inputs.md`` rewrites the page's
copy between its markers; the test ``test_bad_inputs.py`` runs every case and keeps the page's copy
equal to this output.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

WORDS = "river bridge castle forest harbour mountain valley meadow canyon island glacier desert".split()
DOCS = [
    json.dumps({"id": f"d{i}", "contents": f"{word} {WORDS[(i + 1) % 12]} notes {i}"})
    for i, word in enumerate(WORDS)
]
QUERIES = {
    "train": ["t1\triver bridge", "t2\tcastle forest", "t3\tharbour mountain"],
    "dev": ["v1\tvalley meadow"],
}
QRELS = {"train": ["t1 0 d0 2", "t2 0 d2 2", "t3 0 d4 2"], "dev": ["v1 0 d6 2"]}


def write_local(root: Path, corpus=None, queries=None, qrels=None) -> Path:
    """A local collection (splits train, dev, and any other that ``queries`` and ``qrels`` give) of 12
    documents; any file's lines can be replaced."""
    (root / "queries").mkdir(parents=True)
    (root / "qrels").mkdir()
    (root / "corpus.jsonl").write_text("\n".join(corpus if corpus is not None else DOCS) + "\n")
    queries, qrels = {**QUERIES, **(queries or {})}, {**QRELS, **(qrels or {})}
    for split in queries:
        lines = queries[split]
        (root / "queries" / f"{split}.tsv").write_text("".join(f"{line}\n" for line in lines))
        lines = qrels[split]
        (root / "qrels" / f"{split}.txt").write_text("".join(f"{line}\n" for line in lines))
    return root


def local_section(root: Path, **extra) -> dict:
    """The config's dataset section for a local collection."""
    return {
        "name": "x",
        "source": "local",
        "train_split": "train",
        "eval_splits": ["dev"],
        "local": {"path": str(root)},
        **extra,
    }


def prepare(work: Path, root: Path, **extra) -> dict:
    """The prepare_data job on a local collection; returns checks.json."""
    from rerank_scaling.data import prepare_data

    out = work / "data"
    argv = ["--dataset", json.dumps(local_section(root, **extra)), "--out", str(out / "collection")]
    argv += ["--relevance-threshold", "1"]  # config.yaml's evaluation.relevance_threshold
    prepare_data.main([*argv, "--checks", str(out / "checks.json")])
    return json.loads((out / "checks.json").read_text())


def build_examples(work: Path, root: Path, settings: dict, training: dict | None = None) -> None:
    """prepare_data, then the examples job with a BM25-like run that ranks every document."""
    from rerank_scaling.data import build_examples as stage

    prepare(work, root)
    run = work / "train.trec"
    lines = [f"{q} Q0 d{i} {i + 1} {20 - i} bm25" for q in ("t1", "t2", "t3") for i in range(12)]
    run.write_text("\n".join(lines) + "\n")
    argv = ["--collection", str(work / "data" / "collection"), "--split", "train", "--run", str(run)]
    argv += ["--settings", json.dumps(settings), "--pointwise", str(work / "pw.parquet")]
    argv += ["--groups", str(work / "gr.parquet"), "--counts", str(work / "counts.json")]
    if training is not None:
        argv += ["--training", json.dumps(training)]
    stage.main(argv)


@dataclass(frozen=True)
class BadInput:
    what: str  # the bad input, as a user would describe it
    where: str  # where it is caught
    run: Callable[[Path], None]  # raises (or, for warnings, logs) on a fresh work directory


def _config(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def run(work: Path) -> None:
        from rerank_scaling.workflow.load import validate_config

        config = copy.deepcopy(yaml.safe_load((REPO / "config.yaml").read_text()))
        change(config)
        validate_config(config)

    return run


def _set(*path_and_value) -> Callable[[dict], None]:
    *path, value = path_and_value

    def change(config: dict) -> None:
        node = config
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        node[path[-1]] = value

    return change


def _old_relative_prob_key(config: dict) -> None:
    config["evaluation"]["rbp_k"] = config["evaluation"].pop("relative_prob_k")


def _local_path(config: dict) -> None:
    config["dataset"].update(source="local", local={"path": "/data/my-collection"})


def _prepare(**files) -> Callable[[Path], None]:
    return lambda work: prepare(work, write_local(work / "local", **files))


def _warned(work: Path) -> None:
    import logging

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("rerank_scaling").addHandler(handler)
    try:
        prepare(
            work,
            write_local(work / "local", qrels={"dev": [*QRELS["dev"], "v1 0 ghostdoc 1"]}),
            max_unknown_qrels_share=0.5,
        )
    finally:
        logging.getLogger("rerank_scaling").removeHandler(handler)
    raise Warning("warning: " + next(r for r in records if "ghostdoc" in r))


def _run_file(work: Path) -> None:
    from rerank_scaling.data.trec import read_run

    (work / "bm25.trec").write_text("q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 n/a bm25\n")
    read_run(work / "bm25.trec")


def _unsupported_attention(work: Path) -> None:
    """window4 on a family that computes attention inline (MPNet): no attention registry, no pattern."""
    mpnet = work / "mpnet"
    mpnet.mkdir()
    (mpnet / "config.json").write_text(json.dumps({"model_type": "mpnet", "sep_token_id": 2}))

    def change(config: dict) -> None:
        model = {"name": "L1", "family": "hf", "path": str(mpnet), "head": "mean", "role": "fit"}
        config["models"][0] = model
        config["training"]["attention"] = ["full", "window4"]

    _config(change)(work)


def _config_file(work: Path) -> None:
    """A config whose YAML gives a key twice (the first value would be dropped silently)."""
    from rerank_scaling.workflow.load import load_config

    text = (REPO / "config.yaml").read_text().replace("  lr: ", "  lr: 1.0e-3\n  lr: ", 1)
    (work / "config.yaml").write_text(text)
    load_config(work / "config.yaml")


def _bytes(path: str, data: bytes) -> Callable[[Path], None]:
    """prepare_data on a local collection whose file ``path`` holds ``data``."""

    def run(work: Path) -> None:
        root = write_local(work / "local")
        (root / path).write_bytes(data)
        prepare(work, root)

    return run


def _bm25_missing_query(work: Path) -> None:
    from rerank_scaling.data import bm25

    root = write_local(work / "local")
    bm25.build_index(root / "corpus.jsonl", work / "index")
    bm25.search(work / "index", {"v1": "valley meadow", "v2": "zzyzx"}, work / "dev.trec")


def _second_trainer(work: Path) -> None:
    """The train entry point on a work directory whose lock a live process holds (this one)."""
    from rerank_scaling.training import train
    from rerank_scaling.training.work_lock import work_lock

    argv = [
        "--run",
        "L1__pointwise__full__s13",
        "--model",
        json.dumps({"family": "ladder"}),
        "--training",
        json.dumps({"lr": 2e-5, "max_length": 32, "checkpoints": 2}),  # the keys the schema requires
    ]
    argv += ["--pointwise", "p", "--groups", "g", "--corpus", "c", "--checkpoints", str(work / "ckpt")]
    with work_lock(work / "work"):
        try:
            train.main([*argv, "--work", str(work / "work")])
        except SystemExit as err:  # the holder's pid and host differ per run
            raise SystemExit(re.sub(r"pid \d+ on \S+\)", "pid <pid> on <host>)", str(err))) from None


def _full_disk(work: Path) -> None:
    """An atomic write that the OS refuses for space: a file-size limit (EFBIG) stands in for a full
    disk (ENOSPC), which a test cannot cause; both arrive as an OSError without a path."""
    code = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
        "from rerank_scaling.atomic import write_text; "
        "write_text(sys.argv[1], 'x' * 100000)"
    )
    out = work / "results" / "metrics.csv"
    result = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    raise OSError(result.stderr.strip().splitlines()[-1])


def _fraction_too_small(work: Path) -> None:
    """A fraction of a local collection's 3 training queries whose one query gives 1 group step."""
    from rerank_scaling.data import fraction_check

    build_examples(work, write_local(work / "local"), {"pointwise_negatives": 2, "group_negatives": 2})
    training = {"objectives": ["listwise"], "checkpoints": 2, "group_queries_per_batch": 1}
    argv = [
        "--fraction",
        "0.25",
        "--pointwise",
        str(work / "pw.parquet"),
        "--groups",
        str(work / "gr.parquet"),
    ]
    fraction_check.main([*argv, "--training", json.dumps(training), "--out", str(work / "check.json")])


def _ict_too_short(work: Path) -> None:
    """`ict` annotations on a collection of one-sentence passages: the examples, then their ICT."""
    from rerank_scaling.data import annotation_examples

    build_examples(work, write_local(work / "local"), {"pointwise_negatives": 2, "group_negatives": 2})
    argv = ["--source", "ict", "--pointwise", str(work / "pw.parquet"), "--groups", str(work / "gr.parquet")]
    annotation_examples.main([*argv, "--out", str(work / "ict")])


def _file_source(qrels: list[str], prices: dict | None = None) -> Callable[[Path], None]:
    """A generated-query source (training.annotation_files) over a local collection."""

    def run(work: Path) -> None:
        (work / "gen.tsv").write_text("g1\triver bridge notes\ng2\tcastle forest notes\n")
        (work / "gen.txt").write_text("".join(f"{line}\n" for line in qrels))
        source = {
            "queries": str(work / "gen.tsv"),
            "qrels": str(work / "gen.txt"),
            "provenance": "docT5query",
        }

        def change(config: dict) -> None:
            config["dataset"] = local_section(write_local(work / "local"))
            config["training"].update(annotations=["human", "gen"], annotation_files={"gen": source})
            config["evaluation"]["final_only_splits"] = []  # the collection has no test split
            config.setdefault("planning", {})["annotation_cost_per_pair"] = prices

        _config(change)(work)

    return run


def _prepare_splits(eval_splits: list[str], **files) -> Callable[[Path], None]:
    """prepare_data on a local collection whose configured eval splits are ``eval_splits``."""
    return lambda work: prepare(work, write_local(work / "local", **files), eval_splits=eval_splits)


def _thin_training_data(work: Path) -> None:
    """2 of the 3 training queries judged below examples.positive_threshold: the examples job's
    warning (counts.json), which the summary and the answer page show."""
    qrels = {"train": ["t1 0 d0 2", "t2 0 d2 1", "t3 0 d4 1"]}
    settings = {"positive_threshold": 2, "pointwise_negatives": 2, "group_negatives": 2}
    build_examples(work, write_local(work / "local", qrels=qrels), settings, {"objectives": ["pointwise"]})
    raise Warning("warning: " + json.loads((work / "counts.json").read_text())["warnings"][0])


def _command(
    csv: str, *options: str, name: str = "forecast", candidates: str | None = None
) -> Callable[[Path], None]:
    """``rerank-scaling <name> runs.csv --out … OPTIONS`` on a table the case writes; its one line
    on stderr is the message (exit status 2)."""

    def run(work: Path) -> None:
        import contextlib
        import io

        from rerank_scaling.forecast.cli import main

        (work / "runs.csv").write_text(csv)
        extra = ()
        if candidates is not None:
            (work / "candidates.csv").write_text(candidates)
            extra = ("--candidates", str(work / "candidates.csv"))
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            status = main([name, str(work / "runs.csv"), "--out", str(work / "out"), *options, *extra])
        if status == 2:
            raise ValueError(said.getvalue())

    return run


def _damaged_checkpoint(same_size: bool) -> Callable[[Path], None]:
    """A published checkpoint whose weights were truncated (caught by their size when the Snakefile
    is parsed) or overwritten with as many other bytes (caught by their SHA-256 when evaluation
    reads the checkpoint)."""

    def run(work: Path) -> None:
        from rerank_scaling.evaluation.cache_keys import checkpoint_identity
        from rerank_scaling.training.checkpoint_store import SIDECAR, RunStore, check_published

        run_id = "L1__pointwise__full__s13"
        store = RunStore(work / "work", work / "checkpoints" / run_id)
        store.prepare({})
        state = store.trainer_dir / "checkpoint-6"
        state.mkdir()
        (state / "model.safetensors").write_bytes(bytes(1000))
        store.export(state, 3, {"step": 6})
        published = store.checkpoints / "ckpt-03"
        store.publish(3)
        if same_size:
            (published / "model.safetensors").write_bytes(bytes([1]) * 1000)
            checkpoint_identity(published, json.loads((published / SIDECAR).read_text()))
        else:
            (published / "model.safetensors").write_bytes(bytes(100))
            check_published(work / "checkpoints", [run_id])

    return run


RUNS = "model,size,value\nS1,17e6,0.231\nS2,32e6,0.262\nS3,68e6,0.290\nS4,150e6,0.318\n"
BINARY = {"train": ["t1 0 d0 1", "t1 0 d1 0", "t2 0 d2 1", "t3 0 d4 1"]}
CASES = [
    BadInput(
        "`fitting` with a misspelt key", "config (parse time)", _config(_set("fitting", "bootstrapp", 10))
    ),
    BadInput(
        "`fitting.metrics: [nDCG@11]`",
        "config (parse time)",
        _config(_set("fitting", "metrics", ["nDCG@11"])),
    ),
    BadInput(
        "`evaluation.rbp_k` (RelP@k's key before it was renamed)",
        "config (parse time)",
        _config(_old_relative_prob_key),
    ),
    BadInput(
        "`evaluation.rerank_depth` > `retrieval.depth`",
        "config (parse time)",
        _config(_set("evaluation", "rerank_depth", 500)),
    ),
    BadInput(
        "`evaluation.batch_size: 0` (a number or auto)",
        "config (parse time)",
        _config(_set("evaluation", "batch_size", 0)),
    ),
    BadInput(
        "`evaluation.ce_sizes` larger than `evaluation.rerank_depth`",
        "config (parse time)",
        _config(_set("evaluation", "ce_sizes", [64])),
    ),
    BadInput(
        "a split fitted along training but evaluated at the final checkpoint only",
        "config (parse time)",
        _config(_set("fitting", "splits", ["dev", "test"])),
    ),
    BadInput(
        "`cluster.min_runtime` above `cluster.max_runtime`",
        "config (parse time)",
        _config(_set("cluster", {"min_runtime": 120, "max_runtime": 60})),
    ),
    BadInput(
        "`training.max_steps` < `training.checkpoints`",
        "config (parse time)",
        _config(_set("training", "max_steps", 3)),
    ),
    BadInput(
        "too few examples (builtin data) for the checkpoints",
        "config (parse time)",
        _config(_set("dataset", "builtin", "train_queries", 2)),
    ),
    BadInput(
        "a ladder deeper than its base checkpoint",
        "config (parse time)",
        _config(_set("models", 0, "layers", 12)),
    ),
    BadInput(
        "a model directory that does not exist",
        "config (parse time)",
        _config(_set("models", 0, "path", "/models/missing")),
    ),
    BadInput("a local collection that does not exist", "config (parse time)", _config(_local_path)),
    BadInput(
        "`training.attention: [window4]` on a family the pattern does not support",
        "config (parse time)",
        _unsupported_attention,
    ),
    BadInput(
        "a malformed line in `corpus.jsonl`",
        "prepare_data",
        _prepare(corpus=[*DOCS[:2], '{"id": "d2", "contents": "unclosed', *DOCS[3:]]),
    ),
    BadInput("a duplicate document id", "prepare_data", _prepare(corpus=[*DOCS, DOCS[5]])),
    BadInput(
        "a duplicate query id", "prepare_data", _prepare(queries={"train": [*QUERIES["train"], "t1\tagain"]})
    ),
    BadInput("a query line without a tab", "prepare_data", _prepare(queries={"train": ["t1 river bridge"]})),
    BadInput("a non-integer grade in qrels", "prepare_data", _prepare(qrels={"train": ["t1 0 d0 high"]})),
    BadInput(
        "train qrels naming a document not in the corpus",
        "prepare_data",
        _prepare(qrels={"train": [*QRELS["train"], "t1 0 ghostdoc 2"]}),
    ),
    BadInput(
        "dev qrels naming one, within `dataset.max_unknown_qrels_share`", "prepare_data (warning)", _warned
    ),
    BadInput("an empty `queries/dev.tsv`", "prepare_data", _prepare(queries={"dev": []})),
    BadInput(
        "binary (0/1) qrels with `examples.positive_threshold: 2`",
        "training_examples",
        lambda work: build_examples(
            work,
            write_local(work / "local", qrels=BINARY),
            {"positive_threshold": 2, "pointwise_negatives": 2},
        ),
    ),
    BadInput(
        "fewer optimizer steps than checkpoints (from the examples)",
        "training_examples",
        lambda work: build_examples(
            work,
            write_local(work / "local"),
            {"pointwise_negatives": 2, "group_negatives": 2},
            {"objectives": ["listwise"], "checkpoints": 3, "group_queries_per_batch": 2},
        ),
    ),
    BadInput("a TREC run with a non-numeric score", "any reader of runs", _run_file),
    BadInput(
        "`training.checkpoints: 3.0` (any integer field)",
        "config (parse time)",
        _config(_set("training", "checkpoints", 3.0)),
    ),
    BadInput("a key given twice in a config file", "config (parse time)", _config_file),
    BadInput("`fitting.bootstrap: 0`", "config (parse time)", _config(_set("fitting", "bootstrap", 0))),
    BadInput("`run_name: ..`", "config (parse time)", _config(_set("run_name", ".."))),
    BadInput(
        "the train split also in `dataset.eval_splits`",
        "config (parse time)",
        _config(_set("dataset", "eval_splits", ["dev", "test", "train"])),
    ),
    BadInput(
        "`planning.split` not evaluated", "config (parse time)", _config(_set("planning", "split", "dl19"))
    ),
    BadInput(
        "`fitting.equal_compute: [L1, L1]`",
        "config (parse time)",
        _config(_set("fitting", "equal_compute", ["L1", "L1"])),
    ),
    BadInput("an empty query", "prepare_data", _prepare(queries={"dev": ["v1\t"]})),
    BadInput(
        "a whitespace-only training query",
        "prepare_data",
        _prepare(queries={"train": [*QUERIES["train"][:2], "t3\t   "]}),
    ),
    BadInput(
        "a UTF-8 BOM at the start of a queries file",
        "prepare_data",
        _prepare(queries={"dev": ["\ufeffv1\tvalley"]}),
    ),
    BadInput(
        "a file that is not UTF-8",
        "prepare_data",
        _bytes("qrels/dev.txt", "v1 0 d6 2\nv1 0 caf\xe9 1\n".encode("latin-1")),
    ),
    BadInput(
        "an evaluated split judged all grade 0",
        "prepare_data",
        _prepare(qrels={"dev": ["v1 0 d6 0", "v1 0 d7 0"]}),
    ),
    BadInput(
        "`training.data_fractions` with a fraction outside (0, 1]",
        "config (parse time)",
        _config(_set("training", "data_fractions", [0.0, 1.0])),
    ),
    BadInput(
        "a data fraction too small for `training.checkpoints`",
        "config (parse time)",
        _config(_set("training", "data_fractions", [0.02, 1.0])),
    ),
    BadInput(
        "`fitting.data_axis: fractions` with one fraction",
        "config (parse time)",
        _config(_set("fitting", "data_axis", "fractions")),
    ),
    BadInput(
        "a data fraction too small for the checkpoints (from the examples)",
        "fraction_check",
        _fraction_too_small,
    ),
    BadInput("`ict` annotations on passages too short to split", "annotation_examples", _ict_too_short),
    BadInput(
        "a `file` annotation source judging a passage not in the corpus",
        "config (parse time)",
        _file_source(["g1 0 d0 2", "g2 0 ghost 2"]),
    ),
    BadInput(
        "a `file` annotation source without a price when sources are priced",
        "config (parse time)",
        _file_source(["g1 0 d0 2", "g2 0 d2 2"], prices={"human": 0.6}),
    ),
    BadInput("a BM25 run without some queries (Anserini exits 0)", "bm25_search", _bm25_missing_query),
    BadInput("a retry while the trainer still runs", "train", _second_trainer),
    BadInput(
        "a space (or a tab) inside a document id",
        "prepare_data",
        _prepare(corpus=[*DOCS[:3], '{"id": "d 3", "contents": "harbour"}', *DOCS[4:]]),
    ),
    BadInput(
        "a space inside a query id",
        "prepare_data",
        _prepare(queries={"dev": ["v 1\tvalley meadow"]}, qrels={"dev": ["v 1 0 d6 2"]}),
    ),
    BadInput(
        "dev queries and qrels appended to train",
        "check_splits",
        _prepare(
            queries={"train": [*QUERIES["train"], *QUERIES["dev"]]},
            qrels={"train": [*QRELS["train"], *QRELS["dev"]]},
        ),
    ),
    BadInput(
        "a test split identical to dev",
        "check_splits",
        _prepare_splits(["dev", "test"], queries={"test": QUERIES["dev"]}, qrels={"test": QRELS["dev"]}),
    ),
    BadInput(
        "one query text in two splits under two ids",
        "check_splits",
        _prepare(queries={"train": [*QUERIES["train"][:2], "t3\tValley meadow"]}),
    ),
    BadInput(
        "a judged document with empty text",
        "prepare_data",
        _prepare(corpus=[*DOCS[:6], '{"id": "d6", "contents": ""}', *DOCS[7:]]),
    ),
    BadInput(
        "thin training data (most queries unjudged)", "training_examples (warning)", _thin_training_data
    ),
    BadInput(
        "`hidden` on a `ladder` model", "config (parse time)", _config(_set("models", 0, "hidden", 999))
    ),
    BadInput(
        "`evaluation.max_queries: {devv: 2}` (a split not evaluated)",
        "config (parse time)",
        _config(_set("evaluation", "max_queries", {"devv": 2})),
    ),
    BadInput(
        "`evaluation.ce_sizes: [4, 4]` (or any repeated metric parameter)",
        "config (parse time)",
        _config(_set("evaluation", "ce_sizes", [4, 4])),
    ),
    BadInput(
        "`training.max_length: 1024` on 512-position models",
        "config (parse time)",
        _config(_set("training", "max_length", 1024)),
    ),
    BadInput("a full disk (or any OS error) while writing", "every writer", _full_disk),
    BadInput("a zero-byte table of runs", "`rerank-scaling forecast`", _command("")),
    BadInput(
        "a table of runs with a header only", "`rerank-scaling forecast`", _command("model,size,value\n")
    ),
    BadInput("`--bootstrap 0`", "`rerank-scaling forecast`", _command(RUNS, "--bootstrap", "0")),
    BadInput("`--run-sigma -0.1`", "`rerank-scaling forecast`", _command(RUNS, "--run-sigma", "-0.1")),
    BadInput("`--range 1 0`", "`rerank-scaling forecast`", _command(RUNS, "--range", "1", "0")),
    BadInput(
        "`--target-size 0` (or negative)", "`rerank-scaling forecast`", _command(RUNS, "--target-size", "0")
    ),
    BadInput(
        "two values for one run (S2: 0.262 and 0.400)",
        "`rerank-scaling forecast`",
        _command(RUNS + "S2,32e6,0.400\n", "--metric", "nDCG@10"),
    ),
    BadInput(
        "a metric whose direction its name does not tell (`--metric loss`)",
        "`rerank-scaling forecast`",
        _command(RUNS.replace("0.", "3."), "--metric", "loss"),
    ),
    BadInput(
        "an empty `model` cell",
        "`rerank-scaling forecast`",
        _command(RUNS.replace("S3,", ","), "--metric", "nDCG@10"),
    ),
    BadInput(
        "a candidate run with a negative cost",
        "`rerank-scaling advise`",
        _command(
            RUNS,
            "--target",
            "1e9",
            "--metric",
            "nDCG@10",
            name="advise",
            candidates="model,size,cost\nS5,4e8,-2\n",
        ),
    ),
    BadInput(
        "a published checkpoint's file truncated",
        "Snakefile (parse time)",
        _damaged_checkpoint(same_size=False),
    ),
    BadInput(
        "a published checkpoint's file changed in place",
        "evaluate_run",
        _damaged_checkpoint(same_size=True),
    ),
]


def message(case: BadInput) -> str:
    """The message ``case`` gets, temporary paths replaced by ``…``, on one line."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            case.run(Path(tmp))
        except (SystemExit, ValueError, Warning, RuntimeError, OSError) as err:
            text = str(err)
        else:
            raise AssertionError(f"{case.what}: no error")
        text = text.replace(str(Path(tmp).resolve()), "…").replace(tmp, "…")
    text = re.sub(r"^invalid configuration:\s*-\s*", "", text)
    return " ".join(text.split()).replace("|", "\\|")


#: The docs page that shows the table, and the markers around its copy there.
PAGE = REPO / "docs" / "bad-inputs.md"
BEGIN, END = "<!-- bad-inputs:begin -->", "<!-- bad-inputs:end -->"


def table() -> str:
    """The Markdown table; ``<`` escaped so a placeholder such as ``<pid>`` is shown, not taken as HTML."""
    lines = ["| bad input | caught in | message |", "|---|---|---|"]
    lines += [f"| {case.what} | {case.where} | {message(case).replace('<', '&lt;')} |" for case in CASES]
    return "\n".join(lines) + "\n"


def shown(page: Path = PAGE) -> str | None:
    """The table as the page shows it between the markers (None: the markers are missing)."""
    found = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), page.read_text(), re.S)
    return found.group(1) if found else None


def write(page: Path) -> None:
    text = page.read_text()
    if shown(page) is None:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} markers")
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    page.write_text(text[:start] + table() + text[end:])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        write(Path(sys.argv[1]))
    else:
        sys.stdout.write(table())
