"""Metrics pinned on hand-computed examples and cross-checked against pytrec_eval (trec_eval)."""

from __future__ import annotations

import logging
import math
import random

import ir_measures
import pytest
import pytrec_eval

from rerank_scaling.evaluation.metrics import (
    MetricSettings,
    contrastive_entropy,
    evaluate,
    evaluate_per_query,
    ir_metrics,
    ranking,
    relative_gain,
    relative_probability,
    sample_contrastive_sets,
)

# q1 ranks b(1) z(0) a(2) c(unjudged); q2 ranks d(unjudged) c(1); q3 has only a grade-0 judgement;
# q4 is judged but its ranking is empty; q5 is not judged at all.
QRELS = {"q1": {"a": 2, "b": 1, "z": 0}, "q2": {"c": 1}, "q3": {"x": 0}, "q4": {"w": 1}}
RUN = {
    "q1": {"a": 0.2, "b": 0.9, "c": 0.1, "z": 0.5},
    "q2": {"d": 1.0, "c": 0.5},
    "q3": {"x": 1.0},
    "q4": {},
    "q5": {"a": 1.0},
}
CANDIDATES = {"q1": ["a", "b", "c", "z"], "q2": ["c", "d"], "q3": ["x"], "q4": ["w", "v"], "q5": ["a"]}
# Three tied scores: trec_eval orders them c, b, a (docid descending), so the relevant a is third.
TIED_QRELS = {"t": {"a": 1}}
TIED_RUN = {"t": {"a": 0.5, "b": 0.5, "c": 0.5}}


def test_ranking_breaks_ties_by_docid_descending():
    assert ranking({"a": 1.0, "b": 1.0, "c": 2.0}) == ["c", "b", "a"]


def test_ir_measures_by_hand():
    m = ir_metrics(RUN, QRELS, relevance_threshold=1)
    assert set(m["AP"]) == {"q1", "q2", "q3", "q4"}  # q5 has no qrels: skipped
    assert set(ir_metrics({"q1": RUN["q1"]}, QRELS)["AP"]) == {"q1"}  # the run's queries are evaluated
    assert m["RR@10"]["q1"] == pytest.approx(1.0)
    assert m["AP"]["q1"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert m["P@10"]["q1"] == pytest.approx(0.2)
    assert m["R@10"]["q1"] == pytest.approx(1.0)
    dcg = 1 / math.log2(2) + 2 / math.log2(4)  # linear gains: grade / log2(rank + 1)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert m["nDCG@10"]["q1"] == pytest.approx(dcg / idcg)
    assert m["RR@10"]["q2"] == pytest.approx(0.5) and m["AP"]["q2"] == pytest.approx(0.5)
    for q in ("q3", "q4"):  # judged, nothing relevant ranked: 0, and counted
        assert all(m[name][q] == 0.0 for name in m)


@pytest.mark.parametrize("threshold", [1, 2])
def test_ir_metrics_are_the_rows_the_evaluation_writes(threshold):
    """ir_metrics is the evaluation's own path (the registered row functions): the same metrics, the
    same per-query values as evaluate_per_query's rows of the measures over the run alone."""
    settings = MetricSettings.of(
        relevance_threshold=threshold, ce_sizes=(2,), relative_prob_k=(1,), rr_m=(2,)
    )
    scored = {q: docs for q, docs in CANDIDATES.items() if q != "q4"}  # q4's candidates have no score
    rows = evaluate_per_query(RUN, QRELS, scored, settings)
    ours = ir_metrics(RUN, QRELS, relevance_threshold=threshold)
    assert list(ours) == ["nDCG@10", "AP", "RR@10", "R@10", "P@10"]
    for name, values in ours.items():
        part = rows[rows["metric"] == name]
        assert dict(zip(part["qid"], part["value"], strict=True)) == values, name


def test_relevance_threshold_applies_to_binary_measures_only():
    strict = ir_metrics(RUN, QRELS, relevance_threshold=2)
    assert strict["RR@10"]["q1"] == pytest.approx(1 / 3)
    assert strict["AP"]["q1"] == pytest.approx(1 / 3)
    assert strict["P@10"]["q1"] == pytest.approx(0.1)
    assert strict["RR@10"]["q2"] == 0.0
    loose = ir_metrics(RUN, QRELS, relevance_threshold=1)
    assert strict["nDCG@10"] == pytest.approx(loose["nDCG@10"])


def test_ties_follow_trec_eval_for_every_measure():
    m = ir_metrics(TIED_RUN, TIED_QRELS)
    assert m["RR@10"]["t"] == pytest.approx(1 / 3)
    assert m["AP"]["t"] == pytest.approx(1 / 3)
    assert m["nDCG@10"]["t"] == pytest.approx(1 / math.log2(4))
    reference = pytrec_eval.RelevanceEvaluator(TIED_QRELS, {"recip_rank"}).evaluate(TIED_RUN)
    assert reference["t"]["recip_rank"] == pytest.approx(1 / 3)
    # Why ir_metrics resolves ties itself: ir_measures' RR@10 (MS MARCO provider) puts a first.
    raw = ir_measures.calc_aggregate([ir_measures.RR @ 10], TIED_QRELS, TIED_RUN)
    assert raw[ir_measures.RR @ 10] == pytest.approx(1.0)


@pytest.mark.parametrize("threshold", [1, 2])
def test_ir_measures_agree_with_pytrec_eval_on_a_random_tied_run(threshold):
    rng = random.Random(3)
    docs = [f"d{j}" for j in range(40)]
    qrels = {f"q{i}": {d: rng.choice([0, 0, 0, 1, 2, 3]) for d in rng.sample(docs, 25)} for i in range(30)}
    # One-decimal scores: many ties; the run also holds unjudged documents.
    run = {q: {d: round(rng.random(), 1) for d in rng.sample(docs, 30)} for q in qrels}
    ours = ir_metrics(run, qrels, relevance_threshold=threshold)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "map", "recip_rank", "P.10", "recall.10"}, relevance_level=threshold
    )
    ref = evaluator.evaluate(run)
    for q in qrels:
        assert ours["AP"][q] == pytest.approx(ref[q]["map"])
        assert ours["P@10"][q] == pytest.approx(ref[q]["P_10"])
        assert ours["R@10"][q] == pytest.approx(ref[q]["recall_10"])
        # trec_eval has no recip_rank cut: RR@10 is recip_rank when the first relevant is in the top 10.
        rr = ref[q]["recip_rank"]
        assert ours["RR@10"][q] == pytest.approx(rr if rr >= 0.1 - 1e-12 else 0.0)
        if threshold == 1:
            assert ours["nDCG@10"][q] == pytest.approx(ref[q]["ndcg_cut_10"])


def test_contrastive_entropy_by_hand_and_stable():
    sets = sample_contrastive_sets({"q": ["p", "n1", "n2"]}, {"q": {"p": 1}}, n=3, seed=0)
    assert [(s.positive, sorted(s.negatives)) for s in sets] == [("p", ["n1", "n2"])]
    small = {"q": {"p": 2.0, "n1": 0.0, "n2": 1.0}}
    expected = -math.log(math.exp(2) / (math.exp(2) + math.exp(0) + math.exp(1)))
    assert contrastive_entropy(small, sets) == pytest.approx([expected])
    huge = {"q": {d: s + 1000.0 for d, s in small["q"].items()}}  # naive exp overflows
    assert contrastive_entropy(huge, sets) == pytest.approx([expected])


def test_contrastive_entropy_of_a_constant_scorer_is_ln_n():
    candidates = {"q": [f"d{i}" for i in range(100)]}
    qrels = {"q": {"d7": 1, "d9": 2, "d11": 0}}
    sets = sample_contrastive_sets(candidates, qrels, 64, seed=1)
    assert sorted(s.positive for s in sets) == ["d7", "d9"]
    assert all(len(set(s.negatives)) == 63 and not {"d7", "d9"} & set(s.negatives) for s in sets)
    constant = {"q": dict.fromkeys(candidates["q"], 0.5)}
    assert contrastive_entropy(constant, sets) == pytest.approx([math.log(64)] * 2)
    perfect = {"q": {d: 10.0 * (d in ("d7", "d9")) for d in candidates["q"]}}
    assert (contrastive_entropy(perfect, sets) < math.log(64)).all()


def test_contrastive_negatives_respect_the_threshold():
    candidates = {"q": ["hi", "mid", "lo", "unjudged"]}
    qrels = {"q": {"hi": 2, "mid": 1, "lo": 0}}
    (item,) = sample_contrastive_sets(candidates, qrels, 4, seed=0, relevance_threshold=2)
    assert item.positive == "hi" and sorted(item.negatives) == ["lo", "mid", "unjudged"]
    loose = sample_contrastive_sets(candidates, qrels, 3, seed=0, relevance_threshold=1)
    assert sorted(s.positive for s in loose) == ["hi", "mid"]
    assert all(sorted(s.negatives) == ["lo", "unjudged"] for s in loose)


def test_contrastive_sample_is_reproducible_and_order_free(caplog):
    candidates = {"q": [f"d{i}" for i in range(40)], "p": [f"e{i}" for i in range(40)]}
    qrels = {"q": {"d1": 1, "d5": 1}, "p": {"e3": 1}}
    first = sample_contrastive_sets(candidates, qrels, 16, seed=0)
    assert first == sample_contrastive_sets(candidates, qrels, 16, seed=0)
    reordered = {"p": candidates["p"][::-1], "q": candidates["q"][::-1]}
    shuffled_qrels = {"p": qrels["p"], "q": {"d5": 1, "d1": 1}}
    second = sample_contrastive_sets(reordered, shuffled_qrels, 16, seed=0)
    key = lambda s: (s.qid, s.positive)  # noqa: E731
    assert sorted(first, key=key) == sorted(second, key=key)
    # Per-(qid, docid) RNG: dropping a query leaves the other queries' samples unchanged.
    alone = sample_contrastive_sets({"q": candidates["q"]}, qrels, 16, seed=0)
    assert sorted(alone, key=key) == sorted((s for s in first if s.qid == "q"), key=key)
    assert len({s.negatives for s in first if s.qid == "q"}) == 2  # positives draw separately
    assert sample_contrastive_sets(candidates, qrels, 16, seed=1) != first
    with caplog.at_level(logging.WARNING, logger="rerank_scaling.evaluation.metrics"):
        edge = sample_contrastive_sets(candidates, qrels, 40, seed=0)
    # p has exactly 39 negatives (kept); q has 38 for each of its 2 positives (dropped).
    assert [(s.qid, s.positive) for s in edge] == [("p", "e3")]
    assert "dropped 2 of 3" in caplog.text


def test_relative_probability_by_hand_with_ties():
    # Instances = relevant candidates: q1 a, b; q2 c; q4 w (unranked: a miss). q3/q5: none.
    assert relative_probability(RUN, QRELS, CANDIDATES, k=1) == pytest.approx((1 / 4, 4))
    assert relative_probability(RUN, QRELS, CANDIDATES, k=3) == pytest.approx((3 / 4, 4))
    assert relative_probability(RUN, QRELS, CANDIDATES, k=1, relevance_threshold=2) == pytest.approx((0.0, 1))
    tied_candidates = {"t": ["a", "b", "c"]}
    assert relative_probability(TIED_RUN, TIED_QRELS, tied_candidates, k=2) == pytest.approx((0.0, 1))
    assert relative_probability(TIED_RUN, TIED_QRELS, tied_candidates, k=3) == pytest.approx((1.0, 1))


def test_relative_probability_ranks_each_relevant_document_against_the_non_relevant_ones_only():
    # Three relevant documents, two non-relevant: a perfect ranker puts every relevant one first
    # among the non-relevant candidates, so RelP@1 = 1 (the one-item case of "Relative-Based Scaling
    # Law for Neural Language Models", applied 3 times).
    qrels = {"q": {"r1": 1, "r2": 2, "r3": 1, "n1": 0}}
    candidates = {"q": ["r1", "r2", "r3", "n1", "n2"]}
    perfect = {"q": {"r1": 0.9, "r2": 0.8, "r3": 0.7, "n1": 0.2, "n2": 0.1}}
    assert relative_probability(perfect, qrels, candidates, k=1) == pytest.approx((1.0, 3))
    # n1 above r3 only: r3 is second against the non-relevant ones, a miss at k=1, a hit at k=2.
    mixed = {"q": {"r1": 0.9, "r2": 0.8, "r3": 0.3, "n1": 0.5, "n2": 0.1}}
    assert relative_probability(mixed, qrels, candidates, k=1) == pytest.approx((2 / 3, 3))
    assert relative_probability(mixed, qrels, candidates, k=2) == pytest.approx((1.0, 3))
    worst = {"q": {"r1": 0.1, "r2": 0.2, "r3": 0.3, "n1": 0.5, "n2": 0.4}}
    assert relative_probability(worst, qrels, candidates, k=2) == pytest.approx((0.0, 3))
    assert relative_probability(worst, qrels, candidates, k=3) == pytest.approx((1.0, 3))


def test_per_query_rows_aggregate_to_the_table_and_list_dropped_queries():
    settings = MetricSettings.of(ce_sizes=(2, 3), relative_prob_k=(1,), rr_m=(2,))
    scored = {q: docs for q, docs in CANDIDATES.items() if q != "q4"}
    per_query = evaluate_per_query(RUN, QRELS, scored, settings)
    assert list(per_query.columns) == ["metric", "qid", "value", "n"]
    ndcg = per_query[per_query["metric"] == "nDCG@10"].set_index("qid")["value"]
    assert set(ndcg.index) == {"q1", "q2", "q3", "q4"} and ndcg["q4"] == 0.0
    # CE@3 needs 2 negatives: q1 has c and z, q2 only d -> q2 and q4 (no candidates) are dropped.
    dropped = per_query[per_query["metric"] == "CE@3_dropped"].set_index("qid")["value"]
    assert dropped.to_dict() == {"q1": 0.0, "q2": 1.0, "q4": 1.0}
    table = evaluate(RUN, QRELS, scored, settings).set_index("metric")
    assert table.loc["CE@3_dropped", "value"] == 2.0 and table.loc["CE@3", "n"] == 2
    relp = per_query[per_query["metric"] == "RelP@1"].set_index("qid")[["value", "n"]]
    assert relp.loc["q1"].tolist() == [0.5, 2] and relp.loc["q2"].tolist() == [0.0, 1]


def test_relative_gain_by_hand():
    # m=2: q1 b, z -> 1 of ideal a + b = 3; q2 d, c -> 1 of 1; q4 nothing of 1; q3 no relevant: skipped.
    assert relative_gain(RUN, QRELS, CANDIDATES, m=2) == pytest.approx(((1 / 3 + 1 + 0) / 3, 3))
    assert relative_gain(RUN, QRELS, CANDIDATES, m=2, relevance_threshold=2) == pytest.approx((1 / 3, 1))
    # The ideal is over the candidates: a grade-3 document BM25 missed does not lower the ceiling.
    qrels, candidates = {"q": {"a": 1, "b": 2, "missed": 3}}, {"q": ["a", "b"]}
    assert relative_gain({"q": {"a": 0.1, "b": 0.9}}, qrels, candidates, m=1) == pytest.approx((1.0, 1))
    assert relative_gain({"q": {"a": 0.9, "b": 0.1}}, qrels, candidates, m=1) == pytest.approx((0.5, 1))


def test_evaluate_table_by_hand():
    settings = MetricSettings.of(ce_sizes=(2,), relative_prob_k=(1,), rr_m=(2,))
    scored = {q: docs for q, docs in CANDIDATES.items() if q != "q4"}  # the run scores every one
    table = evaluate(RUN, QRELS, scored, settings).set_index("metric")
    names = ["nDCG@10", "AP", "RR@10", "R@10", "P@10", "CE@2", "CE@2_dropped", "RelP@1", "RRstar@2"]
    assert list(table.index) == names
    assert table.loc["RR@10"].tolist() == pytest.approx([(1 + 0.5 + 0 + 0) / 4, 4])
    assert table.loc["RelP@1"].tolist() == pytest.approx([1 / 3, 3])
    assert table.loc["RRstar@2"].tolist() == pytest.approx([(1 / 3 + 1) / 2, 2])
    # CE@2 instances: (q1, a), (q1, b), each against c or z, and (q2, c) against d.
    assert table.loc["CE@2", "n"] == 3
    # q1, q2 and q4 have a relevant judgement; q4 has no candidates, so CE@2 drops it.
    assert table.loc["CE@2_dropped"].tolist() == [1.0, 3]
    alone = evaluate(RUN, QRELS, {"q2": CANDIDATES["q2"]}, settings).set_index("metric")
    assert alone.loc["CE@2"].tolist() == pytest.approx([math.log(math.exp(0.5) + math.exp(1.0)) - 0.5, 1])
    with pytest.raises(KeyError, match="no score"):  # q4's candidates are not in the run
        evaluate(RUN, QRELS, CANDIDATES, settings)


def test_perfect_scorer_reaches_the_maxima():
    rng = random.Random(0)
    # One document at grade >= 2 per query; grade-1 documents are below the threshold (negatives).
    qrels = {
        f"q{i}": {f"d{i}-{j}": (rng.choice([2, 3]) if j == 0 else rng.choice([0, 1])) for j in range(30)}
        for i in range(8)
    }
    candidates = {q: list(docs) for q, docs in qrels.items()}
    perfect = {q: {d: g + rng.random() * 0.1 for d, g in docs.items()} for q, docs in qrels.items()}
    settings = MetricSettings.of(relevance_threshold=2, ce_sizes=(16,), relative_prob_k=(1,), rr_m=(2, 10))
    best = evaluate(perfect, qrels, candidates, settings).set_index("metric")["value"]
    for name in ("nDCG@10", "AP", "RR@10", "R@10", "RelP@1", "RRstar@2", "RRstar@10"):
        assert best[name] == pytest.approx(1.0), name
    constant = {q: dict.fromkeys(docs, 0.0) for q, docs in qrels.items()}
    flat = evaluate(constant, qrels, candidates, settings).set_index("metric")["value"]
    assert flat["CE@16"] == pytest.approx(math.log(16)) and best["CE@16"] < flat["CE@16"]


def test_settings_from_dict():
    settings = MetricSettings.from_dict({"ce_sizes": [16, 64], "seed": 3})
    assert settings == MetricSettings.of(ce_sizes=(16, 64), seed=3)
    assert MetricSettings.from_dict(None) == MetricSettings.of()
    with pytest.raises(ValueError, match="relative_prob_kk"):
        MetricSettings.from_dict({"relative_prob_kk": [1]})
    with pytest.raises(ValueError, match="ce_sizes"):
        MetricSettings.of(ce_sizes=(1,))


def test_the_evaluation_table_reports_and_logs_the_queries_ce_drops(caplog):
    from rerank_scaling.evaluation.checkpoints import metric_rows
    from rerank_scaling.evaluation.eval_settings import EvalSettings

    settings = EvalSettings.of(rerank_depth=100, ce_sizes=(3,), relative_prob_k=(1,), rr_m=(2,))
    scored = {q: docs for q, docs in CANDIDATES.items() if q != "q4"}
    per_query = evaluate_per_query(RUN, QRELS, scored, settings.metric_settings())
    fields = {"run": "L1__pointwise__full__s1", "checkpoint": 7}
    with caplog.at_level(logging.WARNING):
        table = metric_rows(per_query, "dev", settings, fields).set_index("metric")
    assert table.loc["CE@3_dropped", "value"] == 2 and table.loc["CE@3_dropped", "split"] == "dev"
    assert "L1__pointwise__full__s1 checkpoint 7 on dev: CE@3_dropped: 2 of 3 judged queries" in caplog.text
