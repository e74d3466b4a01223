"""How long the whole workflow took: ``results/<run>/workflow_time.json``, written by Snakemake's
``onsuccess`` hook (see the Snakefile), so the docs can state the DAG's wall time from a file.

The clock starts when the Snakefile is parsed (DAG building included) and stops when the last job
has finished. ``fresh`` says whether the run started without a ``data/`` directory, i.e. whether
this is the time of the whole DAG or of a partial re-run; ``jobs`` counts the jobs it finished.
The file keeps the latest run (``last_run``) and the latest fresh one (``last_fresh_run``), so a
partial re-run does not hide the whole DAG's time. :func:`job_times` reads the per-job side:
Snakemake's benchmark file of every job (``benchmarks/<stage>/...tsv``).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from rerank_scaling.atomic import write_text
from rerank_scaling.precision import cpu_name

FINISHED = re.compile(r"^Finished job(id)?:? ", re.M)


def start(results: str | os.PathLike[str]) -> dict[str, object]:
    """The clock and the state at parse time."""
    return {"start": time.time(), "fresh": not (Path(results) / "data").exists()}


def record(
    results: str | os.PathLike[str],
    started: dict[str, object],
    logfiles: str | list[str] | None,
    cores: int | None,
) -> Path:
    """Write ``workflow_time.json`` under ``results``: wall seconds, jobs finished, cores, freshness.

    ``logfiles``: what Snakemake hands its ``onsuccess`` hook (a path, a list of paths, or None).
    """
    now = time.time()
    paths = [logfiles] if isinstance(logfiles, str | os.PathLike) else list(logfiles or [])
    text = "".join(Path(p).read_text(errors="replace") for p in paths if Path(p).exists())
    record = {
        "wall_s": round(now - float(started["start"]), 1),
        "wall_min": round((now - float(started["start"])) / 60, 2),
        "jobs": len(FINISHED.findall(text)),
        "cores": cores,
        "fresh": bool(started["fresh"]),
        "cpus_on_machine": os.cpu_count(),
        "cpu": cpu_name(),  # benchmark numbers compare only within one CPU (bf16 units differ)
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    path = Path(results) / "workflow_time.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    runs = {"last_run": record, "last_fresh_run": record if record["fresh"] else kept.get("last_fresh_run")}
    write_text(path, json.dumps(runs, indent=2) + "\n")
    return path


@dataclass(frozen=True)
class JobTime:
    stage: str  # the folder under benchmarks/: train, eval, bm25, ...
    job: str  # the benchmark file's name: a run id, a part, bm25, merge, ...
    wall_s: float
    cpu_s: float  # nan where Snakemake could not measure it
    folder: str = ""  # the folders between the stage and the file: texts, tokens/L1, a run id, bundles

    @property
    def runs_a_model(self) -> bool:
        """A training job, or an evaluation job that scores checkpoints (a run, a part, a bundle):
        not the texts and tokens it reads, the BM25 rows or the merge."""
        if self.stage == "train":
            return True
        if self.stage != "eval" or self.folder.split("/")[0] in ("texts", "tokens"):
            return False
        return not (self.folder == "" and self.job in ("bm25", "merge"))


def job_times(results: str | os.PathLike[str]) -> list[JobTime]:
    """Every job's wall and CPU seconds from Snakemake's benchmark files under ``results/benchmarks``
    (the last repeat of each file)."""
    root = Path(results) / "benchmarks"
    times = []
    for path in sorted(root.rglob("*.tsv")):
        with path.open(newline="") as handle:
            last = list(csv.DictReader(handle, delimiter="\t"))[-1]
        try:
            cpu = float(last["cpu_time"])
        except (KeyError, ValueError):
            cpu = math.nan
        stage, *folders, _ = path.relative_to(root).parts
        times.append(JobTime(stage, path.stem, float(last["s"]), cpu, "/".join(folders)))
    return times
