"""Ranking metrics of a reranked run: ir_measures measures plus CE@n, RelP@k and R/R*(m).

Which metrics exist, with their parameters, directions and ranges:
:mod:`~rerank_scaling.registries.measures`; the per-query functions it names are here.

Conventions, stated once and used by every function here:

* Queries (trec_eval's rule). The trec measures (nDCG@10, AP, RR@10, R@10, P@10) are computed for
  every query that is both in the run and in the qrels: a run query absent from the qrels is
  skipped; a judged query whose ranking is empty or holds nothing relevant scores 0 and counts in
  the mean (also when none of its judgements reaches ``relevance_threshold``). The reranker
  measures (CE, RelP, R/R*) are defined over the *candidates*: they count only (query, relevant
  candidate) instances, or queries with at least one relevant candidate, so they measure the
  reranker and not the first stage's recall.
* Ties. Equal scores are ordered by docid *descending* (trec_eval's ``qsort`` comparator, which
  pytrec_eval inherits). ir_measures hands RR@k to its MS MARCO provider, which breaks ties by docid
  *ascending*, so :func:`trec_per_query` resolves ties once with :func:`ranking` and passes
  rank-derived, tie-free scores to ir_measures; RelP and R/R* rank with :func:`ranking` too.
* Relevance. Binary measures (AP, RR, R, P, RelP, CE positives, the R/R* query filter) count
  grades >= ``relevance_threshold``; nDCG and R/R* use the grades themselves as gains (negative
  grades count 0), as trec_eval's ``ndcg_cut`` does: gain / log2(rank + 1).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import ir_measures
import numpy as np
import pandas as pd

from rerank_scaling.data.trec import Qrels, Run
from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.registries import measures as metric_registry
from rerank_scaling.registries.measures import DROPPED

log = logging.getLogger(__name__)

Candidates = dict[str, list[str]]  # qid -> first-stage (BM25) candidate docids


@dataclass(frozen=True)
class ContrastiveSet:
    """One CE instance: a relevant candidate and ``n - 1`` sampled non-relevant candidates."""

    qid: str
    positive: str
    negatives: tuple[str, ...]


def ranking(scores: dict[str, float]) -> list[str]:
    """Docids by descending score; ties by docid descending (trec_eval's convention)."""
    return [d for d, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def _relevant(judged: dict[str, int], docids: list[str], threshold: int) -> list[str]:
    return [d for d in docids if judged.get(d, 0) >= threshold]


def trec_per_query(run: Run, qrels: Qrels, measures: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per-query values of ir_measures ``measures`` (name -> measure): metric -> qid -> value.
    Queries and ties: see the module docstring."""
    name_of = {measure: name for name, measure in measures.items()}
    queries = [q for q in run if q in qrels]
    # Score = minus rank: every provider then sees trec_eval's order and no ties.
    tie_free = {q: {d: -float(i) for i, d in enumerate(ranking(run[q]))} for q in queries}
    out = {name: dict.fromkeys(queries, 0.0) for name in measures}
    judged = {q: qrels[q] for q in queries}
    for metric in ir_measures.iter_calc(list(measures.values()), judged, tie_free):
        out[name_of[metric.measure]][metric.query_id] = float(metric.value)
    return out


def ir_metrics(run: Run, qrels: Qrels, relevance_threshold: int = 1) -> dict[str, dict[str, float]]:
    """Per-query values of the measures of the ranked run alone (nDCG@10, AP, RR@10, R@10, P@10:
    :func:`~rerank_scaling.registries.measures.run_measures`), computed by their registered row
    functions (:func:`ndcg_rows`, :func:`ap_rows`, ...: the evaluation's own code): metric -> qid -> value.

    nDCG@10 = DCG@10 / IDCG@10 with DCG = sum_i grade_i / log2(i + 1) (Järvelin & Kekäläinen 2002,
    trec_eval's ``ndcg_cut``); AP, RR@10 (1 / rank of the first relevant in the top 10, else 0),
    R@10 and P@10 use ``rel=relevance_threshold``. Queries and ties: see the module docstring.
    """
    settings = MetricSettings.of(relevance_threshold=relevance_threshold)
    out: dict[str, dict[str, float]] = {}
    for measure in metric_registry.run_measures():
        function = measure.function()
        for value in measure.values(settings):
            name = measure.name_at(value)
            out[name] = {q: v for _, q, v, _ in function(run, qrels, {}, settings, name, value)}
    return out


Rows = list[tuple[str, str, float, int]]  # per-query rows (metric, qid, value, n)


def _trec_rows(run: Run, qrels: Qrels, name: str, measure: Any) -> Rows:
    return [(name, q, v, 1) for q, v in trec_per_query(run, qrels, {name: measure})[name].items()]


def ndcg_rows(run: Run, qrels: Qrels, _c: Candidates, _s: MetricSettings, name: str, cutoff: int) -> Rows:
    """nDCG@cutoff per query, graded gains (trec_eval's ``ndcg_cut``)."""
    return _trec_rows(run, qrels, name, ir_measures.nDCG @ cutoff)


def ap_rows(run: Run, qrels: Qrels, _c: Candidates, settings: MetricSettings, name: str, _v: None) -> Rows:
    """Average precision per query at ``relevance_threshold``."""
    return _trec_rows(run, qrels, name, ir_measures.AP(rel=settings.relevance_threshold))


def rr_rows(run: Run, qrels: Qrels, _c: Candidates, settings: MetricSettings, name: str, cutoff: int) -> Rows:
    """Reciprocal rank of the first relevant document within ``cutoff`` per query."""
    return _trec_rows(run, qrels, name, ir_measures.RR(rel=settings.relevance_threshold) @ cutoff)


def recall_rows(
    run: Run, qrels: Qrels, _c: Candidates, settings: MetricSettings, name: str, cutoff: int
) -> Rows:
    """Recall at ``cutoff`` per query."""
    return _trec_rows(run, qrels, name, ir_measures.R(rel=settings.relevance_threshold) @ cutoff)


def precision_rows(
    run: Run, qrels: Qrels, _c: Candidates, settings: MetricSettings, name: str, cutoff: int
) -> Rows:
    """Precision at ``cutoff`` per query."""
    return _trec_rows(run, qrels, name, ir_measures.P(rel=settings.relevance_threshold) @ cutoff)


def sample_contrastive_sets(
    candidates: Candidates, qrels: Qrels, n: int, seed: int, relevance_threshold: int = 1
) -> list[ContrastiveSet]:
    """CE@n instances (seed paper §4.2): each relevant candidate with ``n - 1`` sampled negatives.

    Negatives are candidates judged below ``relevance_threshold`` or unjudged, drawn without
    replacement by an RNG seeded with (seed, qid, positive) from the sorted pool, so the sample
    depends neither on iteration order nor on the checkpoint. Instances with fewer than ``n - 1``
    negatives are dropped; the count is logged.
    """
    sets, dropped = [], 0
    for qid in sorted(candidates):
        docs = sorted(set(candidates[qid]))
        judged = qrels.get(qid, {})
        positives = _relevant(judged, docs, relevance_threshold)
        negatives = [d for d in docs if judged.get(d, 0) < relevance_threshold]
        if len(negatives) < n - 1:
            dropped += len(positives)
            continue
        for positive in positives:
            rng = random.Random(f"{seed}/{qid}/{positive}")  # str seeds hash with SHA-512: stable
            sets.append(ContrastiveSet(qid, positive, tuple(rng.sample(negatives, n - 1))))
    if dropped:
        total = len(sets) + dropped
        log.warning("CE@%d: dropped %d of %d instances with < %d negatives", n, dropped, total, n - 1)
    return sets


def contrastive_entropy(scores: Run, sets: list[ContrastiveSet]) -> np.ndarray:
    """Per-instance contrastive entropy CE = -log softmax(s+) = logsumexp(s+, s-_1..s-_{n-1}) - s+.

    Seed paper §4.2, after Fang et al. 2024 ("Scaling laws for dense retrieval"); computed with the
    max-shifted log-sum-exp. A constant scorer gives ln n. Shape: (len(sets),).
    """
    try:
        logits = np.array([[scores[s.qid][d] for d in (s.positive, *s.negatives)] for s in sets], float)
    except KeyError as err:
        raise KeyError(f"contrastive_entropy: the run has no score for {err}") from err
    if logits.size == 0:
        return np.empty(0)
    top = logits.max(axis=1, keepdims=True)
    return (top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))) - logits[:, 0]


def relative_probability_per_query(
    run: Run, qrels: Qrels, candidates: Candidates, k: int, relevance_threshold: int = 1
) -> dict[str, tuple[float, int]]:
    """RelP@k per query: qid -> (share of its relevant candidates ranked within k, their count).

    "Relative-Based Scaling Law for Neural Language Models" defines the relative-based
    probability RelP@k (its "RBP@k", not rank-biased precision) for a list with *one* correct
    item: the probability
    that the reranker places it within the top k of the candidate list. With r > 1 relevant
    candidates we keep that definition per relevant candidate: each one is ranked against the
    *non-relevant* candidates only (the other relevant ones are removed from its list), i.e. its
    rank is 1 + the number of non-relevant candidates the run scores above it. This is the
    one-correct-item case applied r times, so a perfect ranker scores 1 for every k, as it does in
    that paper; ranking a relevant item against the other relevant ones would cap a perfect ranker
    at min(k, r) / r (RelP@1 = 1/3 with three relevant documents). Ties follow :func:`ranking`; a
    relevant candidate the run omits is a miss. Queries without a relevant candidate are absent.
    """
    out = {}
    for qid, docs in candidates.items():
        judged = qrels.get(qid, {})
        positives = _relevant(judged, sorted(set(docs)), relevance_threshold)
        if not positives:
            continue
        negatives = {d for d in docs if judged.get(d, 0) < relevance_threshold}
        order = ranking(run.get(qid, {}))
        hits = 0
        for positive in positives:
            if positive not in order:
                continue
            above = sum(d in negatives for d in order[: order.index(positive)])
            hits += above < k
        out[qid] = (hits / len(positives), len(positives))
    return out


def relative_probability(
    run: Run, qrels: Qrels, candidates: Candidates, k: int, relevance_threshold: int = 1
) -> tuple[float, int]:
    """RelP@k over all (query, relevant candidate) instances (:func:`relative_probability_per_query`):
    share, instances."""
    per_query = relative_probability_per_query(run, qrels, candidates, k, relevance_threshold)
    instances = sum(n for _, n in per_query.values())
    hits = sum(share * n for share, n in per_query.values())
    return (hits / instances if instances else float("nan")), instances


def relative_gain_per_query(
    run: Run, qrels: Qrels, candidates: Candidates, m: int, relevance_threshold: int = 1
) -> dict[str, float]:
    """R/R*(m) (Scaling Laws for Online Advertisement Retrieval eq. 2) per query = sum of grades of the run's
    top m / of the ideal top m.

    The ideal is the query's *candidates* sorted by grade (not its full qrels), so a perfect
    reranker reaches 1. Only queries with at least one candidate graded >= ``relevance_threshold``.
    """
    ratios = {}
    for qid, docs in candidates.items():
        judged = qrels.get(qid, {})
        docs = sorted(set(docs))
        ideal = sum(sorted((max(judged.get(d, 0), 0) for d in docs), reverse=True)[:m])
        if ideal <= 0 or not _relevant(judged, docs, relevance_threshold):
            continue
        got = sum(max(judged.get(d, 0), 0) for d in ranking(run.get(qid, {}))[:m])
        ratios[qid] = got / ideal
    return ratios


def relative_gain(
    run: Run, qrels: Qrels, candidates: Candidates, m: int, relevance_threshold: int = 1
) -> tuple[float, int]:
    """R/R*(m) averaged over queries (:func:`relative_gain_per_query`): mean, number of queries."""
    ratios = list(relative_gain_per_query(run, qrels, candidates, m, relevance_threshold).values())
    return (float(np.mean(ratios)) if ratios else float("nan")), len(ratios)


def contrastive_rows(
    run: Run, qrels: Qrels, candidates: Candidates, settings: MetricSettings, name: str, n: int
) -> Rows:
    """CE@n per query (the mean over its instances, weighted by their count), then ``CE@n_dropped``:
    every query of the run with a judgement >= ``relevance_threshold``, value 1 when it yields no
    CE@n instance (no relevant candidate, or too few non-relevant ones), else 0."""
    threshold = settings.relevance_threshold
    judged = sorted(q for q in run if any(g >= threshold for g in qrels.get(q, {}).values()))
    sets = sample_contrastive_sets(candidates, qrels, n, settings.seed, threshold)
    by_query = pd.Series(contrastive_entropy(run, sets), index=[s.qid for s in sets], dtype=float)
    grouped = by_query.groupby(level=0).agg(["mean", "count"])
    rows = [(name, q, float(r["mean"]), int(r["count"])) for q, r in grouped.iterrows()]
    return rows + [(f"{name}{DROPPED}", q, float(q not in grouped.index), 1) for q in judged]


def relative_probability_rows(
    run: Run, qrels: Qrels, candidates: Candidates, settings: MetricSettings, name: str, k: int
) -> Rows:
    """RelP@k per query (:func:`relative_probability_per_query`), weighted by its instances."""
    per_query = relative_probability_per_query(run, qrels, candidates, k, settings.relevance_threshold)
    return [(name, q, share, count) for q, (share, count) in per_query.items()]


def relative_gain_rows(
    run: Run, qrels: Qrels, candidates: Candidates, settings: MetricSettings, name: str, m: int
) -> Rows:
    """R/R*(m) per query (:func:`relative_gain_per_query`)."""
    per_query = relative_gain_per_query(run, qrels, candidates, m, settings.relevance_threshold)
    return [(name, q, v, 1) for q, v in per_query.items()]


def metric_names(settings: MetricSettings) -> list[str]:
    """Every metric :func:`evaluate_per_query` computes, in table order
    (:mod:`~rerank_scaling.registries.measures`)."""
    return metric_registry.metric_names(settings)


def evaluate_per_query(
    run: Run, qrels: Qrels, candidates: Candidates, settings: MetricSettings
) -> pd.DataFrame:
    """Every registered metric (:mod:`~rerank_scaling.registries.measures`) per query, as rows
    (metric, qid, value, n).

    ``value`` is the query's score and ``n`` its weight in the table's mean: 1 for the trec
    measures and R/R*, the query's instances (relevant candidates) for CE and RelP, whose table value
    is the mean over instances. ``CE@n_dropped`` (:func:`contrastive_rows`): its table value is the
    count of dropped queries.
    """
    rows: Rows = []
    for measure in metric_registry.MEASURES.values():
        function = measure.function()
        for value in measure.values(settings):
            rows += function(run, qrels, candidates, settings, measure.name_at(value), value)
    return pd.DataFrame(rows, columns=["metric", "qid", "value", "n"])


def aggregate(per_query: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Rows (metric, value, n) from :func:`evaluate_per_query`'s rows: the n-weighted mean over
    queries (``CE@n_dropped``: the count), n the summed weight; a metric without rows is NaN, 0."""
    rows = []
    for name in names:
        part = per_query[per_query["metric"] == name]
        weight = int(part["n"].sum())
        if name.endswith(DROPPED):
            value = float(part["value"].sum())
        else:
            value = float((part["value"] * part["n"]).sum() / weight) if weight else float("nan")
        rows.append((name, value, weight))
    return pd.DataFrame(rows, columns=["metric", "value", "n"])


def evaluate(run: Run, qrels: Qrels, candidates: Candidates, settings: MetricSettings) -> pd.DataFrame:
    """Every metric as rows (metric, value, n): value is the mean over n queries (instances for
    CE/RelP; for ``CE@n_dropped`` the count of dropped queries among n judged ones)."""
    return aggregate(evaluate_per_query(run, qrels, candidates, settings), metric_names(settings))
