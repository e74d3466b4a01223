"""What the workflow's DAG sees of the data: a digest file per input file, and each part's source keys.

Snakemake re-runs a job when an input is newer than its outputs (``--rerun-triggers mtime``) or when
its params change (``params``). Listing a local collection's files as inputs would re-run everything
after a mere ``touch`` (or a copy that rewrites identical bytes); leaving them out, as before, made an
edit invisible. Here, at parse time (rules/common.smk), each file of a local collection gets a digest
file ``results/<run>/data/sources/<file>.sha256`` that is rewritten **only when the file's content
changes**; the job that reads the file lists its digest file as its input. A content change thus
re-runs exactly the jobs downstream of that file, and identical bytes re-run nothing. Hashing is
skipped while the file's (size, mtime, inode) are those of the last hash (as ``git status`` does).

Sources without files of their own are keyed by what names their content: :func:`part_section` is the
part of the ``dataset`` section one job reads (an ir_datasets id and its options, the builtin
collection's settings), passed to the job as a param, so that changing one split's id re-runs only
that split's jobs.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from rerank_scaling.atomic import write_json, write_text
from rerank_scaling.data.collection import CollectionDir
from rerank_scaling.settings import with_defaults

CHUNK = 1 << 20


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def local_files(section: dict[str, Any]) -> dict[str, Path]:
    """The files of a local collection the configured splits read, by their path inside it."""
    if section["source"] != "local":
        return {}
    root = CollectionDir(Path(os.path.expanduser(section["local"]["path"])))
    files = {"corpus.jsonl": root.corpus}
    for split in dict.fromkeys([section["train_split"], *section["eval_splits"]]):
        files[f"queries/{split}.tsv"] = root.queries(split)
        files[f"qrels/{split}.txt"] = root.qrels(split)
    return files


def digest_path(out_dir: str | os.PathLike[str], name: str) -> Path:
    """Where the digest of the collection's file ``name`` (e.g. ``qrels/dev.txt``) is kept."""
    return Path(out_dir) / f"{name}.sha256"


def record_source_digests(section: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write the digest file of every file of a local collection whose content changed (or that has
    none yet); returns each file's digest path. Nothing for the other sources."""
    files = local_files(section)
    if not files:
        return {}
    stat_file = Path(out_dir) / "stat.json"
    known = json.loads(stat_file.read_text()) if stat_file.exists() else {}
    seen = {}
    for name, path in files.items():
        stat = path.stat()
        key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        entry = known.get(name)
        digest = entry["sha256"] if entry and entry["stat"] == key else file_sha256(path)
        seen[name] = {"stat": key, "sha256": digest}
        target = digest_path(out_dir, name)
        text = f"{digest}  {path}\n"
        if not target.exists() or target.read_text() != text:
            write_text(target, text)
    if seen != {name: known.get(name) for name in seen}:
        write_json(stat_file, {**known, **seen})
    return {name: digest_path(out_dir, name) for name in files}


def part_section(section: dict[str, Any], part: str, split: str | None = None) -> dict[str, Any]:
    """The keys of ``dataset`` that set the content of one part (corpus, or a split's queries or
    qrels): what the part's job gets, so that its params change exactly when its content may."""
    source = section["source"]
    keys: dict[str, Any] = {"source": source}
    if source == "ir_datasets":
        spec = section["ir_datasets"]
        if part == "corpus":
            keys["ir_datasets"] = {"corpus": spec["corpus"]}
        else:
            limits = with_defaults("dataset", section)["ir_datasets"]["max_queries"]
            keys["ir_datasets"] = {
                "splits": {split: spec["splits"][split]},
                "relevance_map": spec.get("relevance_map"),
                "max_queries": {split: limits[split]} if split in limits else {},
            }
    else:  # builtin: one generator makes every part; local: the directory (digests key the files)
        keys[source] = section.get(source)
    if part == "qrels" and "max_unknown_qrels_share" in section:
        keys["max_unknown_qrels_share"] = section["max_unknown_qrels_share"]
    return keys
