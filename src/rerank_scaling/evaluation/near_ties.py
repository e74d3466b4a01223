"""Near-tie fp32 rescoring: bf16 scores whose rank metrics are fp32's.

Every metric of :mod:`.metrics` except CE@k reads only the *order* of each query's candidates
(nDCG, AP, RR, R, P, RelP@k and R/R*(m) rank with ``metrics.ranking``); CE@k is continuous in the
scores. Scoring with bf16 weights moves each score a little but, where two candidates of one query
are nearly tied, flips their order: without rescoring (``benchmarks/results/eval_precision_amx.md``
as of c3d8059) one query of 50 moved a top-heavy metric (RRstar@2, RBP@10, now RelP@10) by up to 0.39 of its
standard error, while CE@k moved by at most 0.02. Rescoring the near ties of different relevance
grades in fp32 removes the flips that change a metric.

**The rule.** Score every pair in bf16 (``b``). Estimate a bound ``e`` on |b - f| (``f``: the fp32
score) from pairs scored both ways, the calibration sample (:func:`calibration_sample`): ``e`` =
``factor`` x the largest |b - f| observed (:func:`error_bound`). Each pair's fp32 score then lies in
an interval: the point ``f`` for a pair scored in fp32, ``[b - e, b + e]`` for one kept in bf16. Two
candidates of one query and different grades (unjudged is grade 0) are *resolved* when their
intervals do not meet -- both in fp32, or |b_x - b_y| > 2e, or, with only x in fp32, |f_x - b_y| > e
-- and their fp32 order is then known. Rescore in fp32, round by round, a cover of the unresolved
pairs (:func:`unresolved_cover`: per query, the candidate in most unresolved pairs first) until every
pair is resolved, and use the fp32 score of every pair scored in fp32 (calibration included).
Without grades (a library caller with no qrels), every pair of candidates counts.

**Why rounds.** The earlier rule rescored, in one round, every candidate within 2e of one of another
grade: both ends of every such pair. Once one end is in fp32 its interval is a point, and the other
end needs fp32 only when it lies within e of that point, half the window. On the default (one
relevant candidate per query) the first round rescores mostly the relevant candidate, the second
its neighbours within e of its fp32 score (the share of pairs scored in fp32 and the rounds:
``benchmarks/results/eval_precision_amx.md``; the pairs against the one-round rule's on the same
checkpoints: ``benchmarks/results/eval_scoring_amx.md``).

**Why only different grades.** Every rank metric here reads the ranking only through the sequence
of grades down it (nDCG's gains, the binary measures' grade >= threshold, RelP's and R/R*'s counts:
:mod:`.metrics`' module docstring): two candidates of the same grade may trade places without
changing any of them. On the default (one relevant candidate per query, 20 candidates) this is what
makes the rule cheap: rescoring *every* near tie scored 60-90% of a split's pairs in fp32 and left
bf16 no faster than fp32 (``benchmarks/results/eval_precision_amx.md`` as of 5e449cd), because a
trained reranker's candidates sit closer together than bf16's error; only the relevant candidate's
near neighbours matter.

**Why the grade order is then fp32's** (given |b - f| <= e for every pair). Take two candidates x, y
of one query with different grades; they are resolved when the rounds end. Both fp32-scored:
compared exactly as fp32 compares them. Both kept in bf16: |b_x - b_y| > 2e, so f_x - f_y =
(b_x - b_y) + (f_x - b_x) - (f_y - b_y) has the sign of b_x - b_y, since the two error terms sum to
at most 2e in size. Only x in fp32: |f_x - b_y| > e, so f_x - f_y = (f_x - b_y) + (b_y - f_y) has
the sign of f_x - b_y. So every pair of different grades compares as in fp32, every ranking's grade
sequence equals fp32's, and so does every rank metric; only CE@k sees the remaining bf16 error. The
scores written are fp32's for the rescored pairs and bf16's elsewhere: two candidates of one grade
may be ordered as bf16 orders them.

**The bound is estimated, not proven**, and the estimate is checked where it can be: the pairs
rescored in fp32 are scored both ways too, and when one's error exceeds ``e`` (the extrapolation
from the calibration sample failed), ``e`` becomes ``factor`` x that error and every pair is checked
again with it (:func:`rescore_near_ties` ends only when no pair is unresolved and no pair scored
both ways contradicts ``e``). Only the pairs kept in bf16 are never checked. ``SAFETY_FACTOR``
covers how far the largest error over *all* of a split's 1000 pairs may exceed the largest over its
calibration sample of 64 (one batch). Measured on the default's 18 final checkpoints, dev and test
(``benchmarks/bench_eval_precision.py``, which reports that ratio and the largest error of a pair
kept in bf16 against ``e`` for every checkpoint and split): with a factor of 2 the ratio reached
2.65 (median 1.18) and one split's largest error 1.01 e
(``benchmarks/results/eval_precision_amx.md`` as committed with that factor, 431b568); 3 covers the
largest ratio seen. The file as it stands gives the same checks for the factor in use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: e = SAFETY_FACTOR x the largest |bf16 - fp32| observed on the pairs scored both ways (see above);
#: the evaluation uses its CPU kind's measured factor (``cpu_profiles.CpuProfile.near_tie_factor``),
#: this one where its kind is unmeasured (``cpu_profiles.FALLBACK``).
SAFETY_FACTOR = 3.0


@dataclass(frozen=True)
class NearTieReport:
    """What one near-tie rescoring did, for the job's log and the benchmark."""

    pairs: int  # pairs scored
    calibration: int  # of them, the calibration sample (scored both ways)
    rescored: int  # pairs whose score is fp32: the calibration sample and the rounds' covers
    rounds: int  # rescoring rounds after the calibration sample (each scores a cover of the unresolved pairs)
    calibration_error: float  # largest |bf16 - fp32| on the calibration sample
    largest_error: float  # largest |bf16 - fp32| of every pair scored both ways
    bound: float  # e at the end: factor x the calibration sample's largest error, or a larger one seen
    factor: float = SAFETY_FACTOR  # the safety factor e was found with

    @property
    def fraction(self) -> float:
        """Share of the pairs scored in fp32."""
        return self.rescored / self.pairs if self.pairs else 0.0


#: Pairs in the calibration sample: the size the CPU kinds' safety factors were measured with
#: (``benchmarks/bench_eval_precision.py`` at ``evaluation.batch_size`` 64), whatever the batch size.
CALIBRATION_PAIRS = 64


def calibration_sample(pairs: int, size: int) -> list[int]:
    """``size`` indices spread evenly over ``pairs`` pairs (all when there are fewer): the pairs come
    sorted by length (:func:`.rerank.tokenize_pairs`), so the sample spans short and long ones, not
    only the shortest of a first batch."""
    if pairs <= size:
        return list(range(pairs))
    return sorted({int(i) for i in np.linspace(0, pairs - 1, size).round()})


def error_bound(bf16: Sequence[float], fp32: Sequence[float], factor: float = SAFETY_FACTOR) -> float:
    """e = ``factor`` x the largest |bf16 - fp32| of pairs scored both ways."""
    if len(bf16) != len(fp32) or not len(bf16):
        raise ValueError(f"error_bound needs matching non-empty scores, got {len(bf16)} and {len(fp32)}")
    return factor * float(np.max(np.abs(np.asarray(bf16, float) - np.asarray(fp32, float))))


def pairs_by_query(qids: Sequence[str]) -> dict[str, list[int]]:
    """Each query's pair indices, in order (``qids``: each pair's query)."""
    by_query: dict[str, list[int]] = {}
    for index, qid in enumerate(qids):
        by_query.setdefault(qid, []).append(index)
    return by_query


def unresolved_cover(
    qids: Sequence[str],
    bf16: Sequence[float],
    fp32: Mapping[int, float],
    bound: float,
    grades: Sequence[int] | None = None,
) -> list[int]:
    """The pairs to score in fp32 next (ascending): per query, a cover of its unresolved pairs, the
    candidate in most of them first (greedy; ties to the earlier pair).

    A pair of candidates of one query (with ``grades``, of different grades) is unresolved when
    their intervals meet (inclusive): ``[b - bound, b + bound]`` for a pair kept in bf16, the point
    ``fp32[i]`` for one scored in fp32 (module docstring); two fp32-scored candidates never are."""
    cover: list[int] = []
    for indices in pairs_by_query(qids).values():
        index = np.asarray(indices)
        known = np.asarray([i in fp32 for i in indices])
        values = np.asarray([fp32.get(i, bf16[i]) for i in indices], float)
        radii = np.where(known, 0.0, bound)
        meet = np.abs(values[:, None] - values[None, :]) <= radii[:, None] + radii[None, :]
        meet &= ~(known[:, None] & known[None, :])
        np.fill_diagonal(meet, False)
        if grades is not None:
            graded = np.asarray([grades[i] for i in indices])
            meet &= graded[:, None] != graded[None, :]
        while meet.any():
            pick = int(np.argmax(np.where(known, 0, meet.sum(axis=1))))
            cover.append(int(index[pick]))
            meet[pick, :] = meet[:, pick] = False
    return sorted(cover)


def rescore_near_ties(
    qids: Sequence[str],
    bf16: Sequence[float],
    fp32_of: Callable[[list[int]], list[float]],
    calibration: list[int],
    factor: float = SAFETY_FACTOR,
    grades: Sequence[int] | None = None,
) -> tuple[list[float], NearTieReport]:
    """Each pair's score, fp32 for the calibration sample and every pair rescored to resolve a near
    tie, else ``bf16``; and a report of what was rescored (see the module docstring for the rule
    and why it keeps fp32's order).

    ``qids``: each pair's query; ``bf16``: each pair's bf16 score; ``fp32_of(indices)``: the fp32
    scores of those pairs (indices ascending), in their order; ``calibration``: the pairs scored both
    ways before any near tie is looked for (:func:`calibration_sample`); ``grades``: each pair's
    relevance grade, so that only candidates of different grades count as near ties (None: all)."""
    if len(qids) != len(bf16):
        raise ValueError(f"rescore_near_ties: {len(qids)} queries for {len(bf16)} scores")
    calibration = sorted(calibration)
    fp32: dict[int, float] = dict(zip(calibration, fp32_of(calibration), strict=True))
    calibration_error = max((abs(bf16[i] - f) for i, f in fp32.items()), default=0.0)
    largest, rounds = calibration_error, 0
    while True:
        bound = factor * largest
        todo = unresolved_cover(qids, bf16, fp32, bound, grades)
        if not todo:
            break  # every pair resolved, and no pair scored both ways contradicts e
        rounds += 1
        fp32.update(zip(todo, fp32_of(todo), strict=True))
        seen = max(abs(bf16[i] - fp32[i]) for i in todo)
        if seen > bound:  # the estimate failed: e from the largest error seen, every pair checked again
            largest = seen
    scores = [fp32.get(i, b) for i, b in enumerate(bf16)]
    report = NearTieReport(
        pairs=len(bf16),
        calibration=len(calibration),
        rescored=len(fp32),
        rounds=rounds,
        calibration_error=calibration_error,
        largest_error=max((abs(bf16[i] - f) for i, f in fp32.items()), default=0.0),
        bound=bound,
        factor=factor,
    )
    return scores, report
