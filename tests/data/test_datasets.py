"""The three dataset sources materialise the same local format; ir_datasets runs offline on a cache."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from rerank_scaling.data.collection import CollectionDir, iter_corpus, read_queries
from rerank_scaling.data.datasets import materialise_dataset
from rerank_scaling.data.trec import read_qrels

SMART_DOCS = """.I 1
.T
flow over a flat plate
.A
someone
.B
j. ae. 1
.W
laminar boundary layer flow over a flat plate at high speed .
.I 2
.T
heat transfer in hypersonic flow
.A
other
.B
j. ae. 2
.W
heat transfer rates measured on a cone in hypersonic flow .
.I 3
.T
buckling of thin shells
.A
third
.B
j. ae. 3
.W
buckling loads of thin cylindrical shells under axial compression .
"""
SMART_QUERIES = """.I 001
.W
boundary layer over a flat plate
.I 004
.W
buckling of cylinders
"""
SMART_QRELS = "1 1 1\n1 2 4\n2 3 2\n"


def _tar_cranfield(home, docs, queries, qrels):
    """Place cran.tar.gz where ir_datasets looks for it ($IR_DATASETS_HOME/cranfield/)."""
    target = home / "cranfield"
    target.mkdir(parents=True)
    with tarfile.open(target / "cran.tar.gz", "w:gz") as tar:
        for name, text in (("cran.all.1400", docs), ("cran.qry", queries), ("cranqrel", qrels)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _irds_section(relevance_map=None):
    section = {
        "name": "cran",
        "source": "ir_datasets",
        "train_split": "test",
        "eval_splits": ["test"],
        "ir_datasets": {"corpus": "cranfield", "splits": {"test": "cranfield"}},
    }
    if relevance_map:
        section["ir_datasets"]["relevance_map"] = relevance_map
    return section


def prepare_in_subprocess(section: dict, out, irds_home) -> subprocess.CompletedProcess:
    """Run the prepare_data stage; ir_datasets reads IR_DATASETS_HOME at import, hence a new process."""
    env = {**os.environ, "IR_DATASETS_HOME": str(irds_home)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rerank_scaling.data.prepare_data",
            "--dataset",
            json.dumps(section),
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
    )


def test_ir_datasets_source_reads_a_local_cache(tmp_path):
    home = tmp_path / "irds"
    _tar_cranfield(home, SMART_DOCS, SMART_QUERIES, SMART_QRELS)
    result = prepare_in_subprocess(
        _irds_section({"1": 4, "2": 3, "3": 2, "4": 1, "-1": 0}), tmp_path / "coll", home
    )
    assert result.returncode == 0, result.stderr
    out = CollectionDir(tmp_path / "coll")
    docs = dict(iter_corpus(out.corpus))
    assert set(docs) == {"1", "2", "3"} and "flat plate" in docs["1"]
    assert read_queries(out.queries("test")) == {
        "1": "boundary layer over a flat plate",
        "2": "buckling of cylinders",
    }
    # Cleverdon's codes recoded to gains: code 1 -> 4, code 4 -> 1.
    assert read_qrels(out.qrels("test")) == {"1": {"1": 4, "2": 1}, "2": {"3": 3}}


def test_an_ir_datasets_query_without_text_is_dropped_and_counted(tmp_path):
    """A user cannot fix an ir_datasets file (a local one raises naming its line): the query goes."""
    home = tmp_path / "irds"
    _tar_cranfield(home, SMART_DOCS, SMART_QUERIES + ".I 005\n.W\n \n", SMART_QRELS + "3 1 1\n")
    result = prepare_in_subprocess(_irds_section(), tmp_path / "coll", home)
    assert result.returncode == 0, result.stderr
    assert "cranfield: 1 queries without text dropped (e.g. ['3'])" in result.stderr
    out = CollectionDir(tmp_path / "coll")
    assert sorted(read_queries(out.queries("test"))) == ["1", "2"] and "3" not in read_qrels(
        out.qrels("test")
    )


def test_ir_datasets_offline_error_names_the_missing_file(tmp_path):
    result = prepare_in_subprocess(_irds_section(), tmp_path / "coll", tmp_path / "empty")
    assert result.returncode != 0
    assert "DatasetUnavailable" in result.stderr
    assert "cran.tar.gz" in result.stderr and str(tmp_path / "empty") in result.stderr
    assert not (tmp_path / "coll" / "corpus.jsonl").exists()


def test_local_source_checks_files_and_copies_the_corpus(tmp_path):
    """Copied, not linked: a link would make a touch of the user's file look like a change."""
    section = {
        "name": "x",
        "source": "builtin",
        "train_split": "train",
        "eval_splits": ["test"],
        "builtin": {"train_queries": 10, "dev_queries": 2, "test_queries": 5},
    }
    built = materialise_dataset(section, tmp_path / "built")
    local = {
        "name": "y",
        "source": "local",
        "train_split": "train",
        "eval_splits": ["test"],
        "local": {"path": str(built.root)},
    }
    out = materialise_dataset(local, tmp_path / "local")
    assert not out.corpus.is_symlink() and out.corpus.read_bytes() == built.corpus.read_bytes()
    assert read_qrels(out.qrels("test")) == read_qrels(built.qrels("test"))
    built.qrels("test").unlink()
    with pytest.raises(FileNotFoundError, match="qrels/test.txt"):
        materialise_dataset(local, tmp_path / "again")


def test_collection_dir_lists_complete_splits(tmp_path):
    section = {
        "name": "x",
        "source": "builtin",
        "train_split": "train",
        "eval_splits": ["dev", "test"],
        "builtin": {"train_queries": 10, "dev_queries": 2, "test_queries": 5},
    }
    out = materialise_dataset(section, tmp_path / "c")
    assert CollectionDir(out.root).splits() == ["dev", "test", "train"]
