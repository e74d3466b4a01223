"""What an evaluation job pays before it scores anything, measured on this CPU: the set-up side of
the evaluation bundling rule (:meth:`rerank_scaling.workflow.job_resources.JobSizes.evaluation_bundles`).

    python benchmarks/bench_eval_job_setup.py --out benchmarks/results/eval_job_setup.md

* ``import_seconds``: a fresh interpreter importing the evaluation stage (torch, transformers,
  sentence-transformers and the package), as every job's process does;
* ``parse_seconds``: Snakemake parsing the workflow with config.paper.yaml (``--list-rules``), as the
  SLURM plugin's job step does in every job;
* ``read_seconds_per_pair``: reading one split's ``split_tokens`` and ``split_texts`` tables
  (:func:`rerank_scaling.evaluation.rerank.read_split_tokens`, pyarrow) of MS MARCO dev's shape
  (100 candidates a query, ~90 tokens a pair), per candidate pair, as each evaluated run does.

Each is the CPU time (user + system) of a fresh process (the read: of the reads alone), the median
of ``--repeats``, interleaved: on a shared machine wall time is mostly waiting for a core, which a
job's own node does not; file-system waits are not in it. The machine's load is recorded.
A SLURM job's own start (scheduling, prolog) is not measured here and not in the rule.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from benchmark_output import emit

from rerank_scaling.precision import cpu_name

REPO = Path(__file__).resolve().parents[1]
IMPORTS = "import torch, transformers, sentence_transformers; import rerank_scaling.evaluation.evaluate"
READ = """
import sys, time, pyarrow.parquet as pq
from rerank_scaling.evaluation.rerank import read_split_tokens
start = time.process_time()
read_split_tokens(sys.argv[1]); pq.read_table(sys.argv[2]).to_pandas()
print(time.process_time() - start)
"""


def cpu_seconds(command: list[str]) -> float:
    """CPU seconds (user + system) of ``command`` in a fresh process: on a shared machine its wall
    time is mostly waiting for a core, which a job's own node does not."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, capture_output=True, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def write_tables(root: Path, pairs: int, seed: int = 0) -> tuple[Path, Path]:
    """A ``split_tokens`` table (qid, docid, input_ids of 60-120 tokens) and a ``split_texts`` one
    (docid, text of ~330 characters) of ``pairs`` candidate pairs."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(60, 121, pairs)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(rng.integers(0, 50000, offsets[-1]))
    )
    qids = [str(q) for q in np.repeat(np.arange(pairs // 100 + 1), 100)[:pairs]]
    docids = [str(d) for d in rng.integers(0, 8_841_823, pairs)]
    tokens, texts = root / "tokens.parquet", root / "texts.parquet"
    pq.write_table(pa.table({"qid": qids, "docid": docids, "input_ids": ids}), tokens)
    text = "".join(rng.choice(list("abcdefghij "), 330))
    pq.write_table(pa.table({"docid": docids, "text": [text] * pairs}), texts)
    return tokens, texts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=698_000, help="MS MARCO dev/small: 6,980 queries x 100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    python, snakemake = sys.executable, str(Path(sys.executable).parent / "snakemake")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-eval-setup-") as tmp:
        tokens, texts = write_tables(Path(tmp), args.pairs)
        runs: dict[str, list[float]] = {"import_seconds": [], "parse_seconds": [], "read_seconds": []}
        for _ in range(args.repeats):
            runs["import_seconds"].append(cpu_seconds([python, "-c", IMPORTS]))
            parse = [snakemake, "--configfile", "config.paper.yaml", "--list-rules", "--cores", "1"]
            runs["parse_seconds"].append(cpu_seconds(parse))
            read = subprocess.run(
                [python, "-c", READ, str(tokens), str(texts)], check=True, capture_output=True
            )
            runs["read_seconds"].append(float(read.stdout))
    medians = {name: statistics.median(values) for name, values in runs.items()}
    setup = {
        "import_seconds": round(medians["import_seconds"], 2),
        "parse_seconds": round(medians["parse_seconds"], 2),
        "read_seconds_per_pair": float(f"{medians['read_seconds'] / args.pairs:.3g}"),
    }
    lines = [
        "# Evaluation job set-up on this CPU (benchmarks/bench_eval_job_setup.py)",
        "",
        "Generated by `python benchmarks/bench_eval_job_setup.py --out "
        "benchmarks/results/eval_job_setup.md`.",
        f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); 1-minute load average {load:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after: a shared machine, so these are upper bounds for a GPU node's CPU.",
        f"Tables of {args.pairs:,} candidate pairs (MS MARCO dev/small's shape); median of {args.repeats}.",
        "",
        "| set-up step (CPU seconds) | median (s) | runs (s) |",
        "|---|---|---|",
        *(
            f"| {name} | {medians[name]:.2f} | {', '.join(f'{v:.2f}' for v in values)} |"
            for name, values in runs.items()
        ),
        "",
        f"```json\n{json.dumps(setup, indent=2)}\n```",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
