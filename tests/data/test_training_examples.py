"""training_examples streams the train run: the same negative pools, a fraction of the memory."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from rerank_scaling.data.training_examples import ExampleSettings, negative_pools
from rerank_scaling.data.trec import iter_run_queries, read_run, write_run


def synthetic_run(path, queries: int, depth: int) -> dict:
    rng = random.Random(0)
    run = {
        f"q{q}": {f"d{rng.randrange(130_000)}": float(depth - r) for r in range(depth)}
        for q in range(queries)
    }
    write_run(run, path, tag="bm25")
    return {q: {d: 1 for d in list(docs)[:2]} for q, docs in run.items()}  # two judged per query


def measure(path) -> dict:
    """Peak traced memory of building the pools from the whole run and from the stream, in this
    process (tests/data/test_training_examples.py runs it in a fresh one: in a long pytest process other
    tests' threads and garbage are traced too, and the comparison failed there once)."""
    qrels = synthetic_run(path, 3000, 100)
    settings = ExampleSettings.of(negative_depth=100)  # the paper config's: every candidate is kept
    tracemalloc.start()
    whole = negative_pools(read_run(path).items(), qrels, settings)
    whole_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    streamed = negative_pools(iter_run_queries(path), qrels, settings)
    streamed_peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return {
        "equal": streamed == whole,
        "smallest_pool": min(len(pool) for pool in streamed.values()),
        "whole_peak": whole_peak,
        "streamed_peak": streamed_peak,
    }


def test_streamed_pools_equal_the_whole_run_and_take_a_fraction_of_its_memory(tmp_path):
    """300k lines over 130k documents: ~2.3 lines per document, as MS MARCO's 20M over 8.8M."""
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[2]); import test_training_examples as t; "
        "print(json.dumps(t.measure(sys.argv[1])))"
    )
    tests = Path(__file__).resolve().parent
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "train.trec"), str(tests)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parents[1] / "src"), str(tests)])},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["equal"]
    assert result["smallest_pool"] > 90  # ~100 candidates less the two judged
    whole, streamed = result["whole_peak"] / 1e6, result["streamed_peak"] / 1e6
    print(f"peak: whole run {whole:.1f} MB, streamed {streamed:.1f} MB")
    assert result["streamed_peak"] < 0.5 * result["whole_peak"]


def test_a_run_not_grouped_by_query_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    with pytest.raises(ValueError, match=r"run\.trec:3: query 'q1' comes back .* sort the run"):
        list(iter_run_queries(path))


def test_thin_training_data_is_counted_with_a_warning_naming_the_settings(tmp_path, caplog):
    """2 of 3 training queries without a judgement at positive_threshold 2: more than THIN_SHARE."""
    from bad_inputs import build_examples, write_local

    from rerank_scaling.data.training_examples import THIN_SHARE

    qrels = {"train": ["t1 0 d0 2", "t2 0 d2 1", "t3 0 d4 1"]}
    settings = {"positive_threshold": 2, "pointwise_negatives": 2, "group_negatives": 2}
    build_examples(
        tmp_path, write_local(tmp_path / "local", qrels=qrels), settings, {"objectives": ["pointwise"]}
    )
    counts = json.loads((tmp_path / "counts.json").read_text())
    assert counts["queries"] == 3 and counts["without_positive"] == 2, counts
    assert counts["dropped_for_negatives"] == {"pointwise": 0}, "groups are not trained: not counted"
    (warning,) = counts["warnings"]
    assert warning.startswith(
        f"thin training data (pointwise examples): 2 of 3 training queries (67%, more than {THIN_SHARE:.0%})"
    )
    assert "examples.positive_threshold = 2" in warning and warning in caplog.text


def test_queries_dropped_for_too_few_negatives_are_counted_per_kind(tmp_path):
    """A shallow BM25 run leaves t3 one negative: enough for pointwise (1), not for groups (3)."""
    from bad_inputs import write_local

    from rerank_scaling.data import build_examples, prepare_data

    root = write_local(tmp_path / "local")
    section = {
        "name": "x",
        "source": "local",
        "train_split": "train",
        "eval_splits": ["dev"],
        "local": {"path": str(root)},
    }
    prepare_data.main(["--dataset", json.dumps(section), "--out", str(tmp_path / "c")])
    run = tmp_path / "train.trec"
    depth = {"t1": 12, "t2": 12, "t3": 2}  # t3's positive d4 and one more document
    lines = [
        f"{q} Q0 d{(i + 4) % 12 if q == 't3' else i} {i + 1} {20 - i} bm25"
        for q, n in depth.items()
        for i in range(n)
    ]
    run.write_text("\n".join(lines) + "\n")
    settings = {"pointwise_negatives": 1, "group_negatives": 3}
    argv = [
        "--collection",
        str(tmp_path / "c"),
        "--split",
        "train",
        "--run",
        str(run),
        "--settings",
        json.dumps(settings),
    ]
    argv += ["--pointwise", str(tmp_path / "p.parquet"), "--groups", str(tmp_path / "g.parquet")]
    build_examples.main(
        [
            *argv,
            "--counts",
            str(tmp_path / "counts.json"),
            "--training",
            json.dumps({"objectives": ["pointwise", "listwise"]}),
        ]
    )
    counts = json.loads((tmp_path / "counts.json").read_text())
    assert counts["dropped_for_negatives"] == {"pointwise": 0, "groups": 1}, counts
    (warning,) = counts["warnings"]  # 1 of 3 (33%) > 10% for groups only
    assert (
        warning.startswith("thin training data (groups examples): 1 of 3")
        and "examples.group_negatives = 3" in warning
    )
