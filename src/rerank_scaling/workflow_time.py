"""How long the whole workflow took: ``results/<run>/workflow_time.json``, written by Snakemake's
``onsuccess`` hook (see the Snakefile), so the README can state the DAG's wall time from a file.

The clock starts when the Snakefile is parsed (DAG building included) and stops when the last job
has finished. ``fresh`` says whether the run started without a ``data/`` directory, i.e. whether
this is the time of the whole DAG or of a partial re-run; ``jobs`` counts the jobs it finished.
The file keeps the latest run (``last_run``) and the latest fresh one (``last_fresh_run``), so a
partial re-run does not hide the whole DAG's time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from pathlib import Path

from rerank_scaling.atomic import write_text

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
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    path = Path(results) / "workflow_time.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    runs = {"last_run": record, "last_fresh_run": record if record["fresh"] else kept.get("last_fresh_run")}
    write_text(path, json.dumps(runs, indent=2) + "\n")
    return path
