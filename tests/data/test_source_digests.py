"""Digest files follow the content of a local collection's files; part sections follow ids."""

from __future__ import annotations

import os

from bad_inputs import local_section, write_local

from rerank_scaling.data.source_digests import part_section, record_source_digests


def mtimes(paths) -> dict:
    return {name: path.stat().st_mtime_ns for name, path in paths.items()}


def test_a_digest_file_changes_only_with_its_files_content(tmp_path):
    root = write_local(tmp_path / "local")
    section = local_section(root)
    out = tmp_path / "sources"
    first = record_source_digests(section, out)
    assert sorted(first) == [
        "corpus.jsonl",
        "qrels/dev.txt",
        "qrels/train.txt",
        "queries/dev.tsv",
        "queries/train.tsv",
    ]
    before = mtimes(first)
    for name in first:  # identical bytes, new mtimes
        (root / name).write_bytes((root / name).read_bytes())
    assert mtimes(record_source_digests(section, out)) == before
    (root / "qrels" / "dev.txt").write_text("v1 0 d6 1\n")
    after = mtimes(record_source_digests(section, out))
    assert [name for name in after if after[name] != before[name]] == ["qrels/dev.txt"]
    assert (out / "qrels" / "dev.txt.sha256").read_text().split()[1] == str(root / "qrels" / "dev.txt")


def test_an_unchanged_stat_skips_hashing(tmp_path):
    """The (size, mtime, inode) of the last hash stand for the content, as in git's index: an
    edit that keeps all three (which no editor does) is not seen; one that changes any is."""
    root = write_local(tmp_path / "local")
    section = local_section(root)
    record_source_digests(section, tmp_path / "sources")
    qrels = root / "qrels" / "dev.txt"
    stat = qrels.stat()
    qrels.write_text(qrels.read_text().replace("2", "3"))  # same size
    os.utime(qrels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    digest = tmp_path / "sources" / "qrels" / "dev.txt.sha256"
    old = digest.read_text()
    record_source_digests(section, tmp_path / "sources")
    assert digest.read_text() == old
    qrels.touch()
    record_source_digests(section, tmp_path / "sources")
    assert digest.read_text() != old


def test_ir_datasets_parts_are_keyed_by_their_own_ids():
    section = {
        "source": "ir_datasets",
        "train_split": "train",
        "eval_splits": ["dev"],
        "ir_datasets": {
            "corpus": "msmarco-passage",
            "splits": {"train": "msmarco-passage/train/judged", "dev": "msmarco-passage/dev/small"},
            "max_queries": {"train": 5000},
        },
    }
    other = {
        **section,
        "ir_datasets": {**section["ir_datasets"], "splits": {**section["ir_datasets"]["splits"]}},
    }
    other["ir_datasets"]["splits"]["dev"] = "msmarco-passage/trec-dl-2019/judged"
    changed = [
        (part, split)
        for part, split in [
            ("corpus", None),
            ("queries", "train"),
            ("qrels", "train"),
            ("queries", "dev"),
            ("qrels", "dev"),
        ]
        if part_section(section, part, split) != part_section(other, part, split)
    ]
    assert changed == [("queries", "dev"), ("qrels", "dev")]
    assert part_section(section, "qrels", "train")["ir_datasets"]["max_queries"] == {"train": 5000}
