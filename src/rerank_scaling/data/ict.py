"""Built-in Inverse-Cloze-Task (ICT) collection from real English text shipped by a PyPI package.

ICT (Lee et al. 2019, "Latent Retrieval for Weakly Supervised Open Domain QA"; Fang et al., Scaling Laws for
Dense Retrieval's annotation): a sentence of a passage is the query and the passage *without that sentence* is
relevant. Passages are windows of consecutive sentences of news articles (gensim ships the Lee
background corpus, 300 Australian news articles); other passages of the same article share its
topic and are judged partially relevant, which gives graded qrels:

    grade 2: the query's own passage (minus the query sentence)
    grade 1: other passages of the same article (``same_article_grade``; 0 disables)

Everything is deterministic given ``seed``; nothing is downloaded.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rerank_scaling.data.collection import Queries, query_key
from rerank_scaling.data.trec import Qrels
from rerank_scaling.settings import SectionSettings

#: Text sources shipped inside installed packages, one document per line.
SHIPPED_TEXTS: dict[str, tuple[str, str]] = {
    "lee_background": ("gensim", "test/test_data/lee_background.cor"),
    "lee": ("gensim", "test/test_data/lee.cor"),
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class IctSettings(SectionSettings):
    """Settings of the built-in collection (config ``dataset.builtin``; defaults: the schema's)."""

    SECTION: ClassVar[str] = "dataset.builtin"

    text: str
    passage_sentences: int
    min_query_words: int
    same_article_grade: int
    seed: int
    train_queries: int
    dev_queries: int
    test_queries: int


def shipped_text_path(name: str) -> Path:
    """Path of a shipped text (``lee_background``) or of a user file (one document per line)."""
    if name not in SHIPPED_TEXTS:
        path = Path(name)
        if not path.exists():
            raise FileNotFoundError(
                f"dataset.builtin.text: {name!r} is neither a shipped text ({', '.join(SHIPPED_TEXTS)}) "
                "nor an existing file with one document per line"
            )
        return path
    package, relative = SHIPPED_TEXTS[name]
    module = __import__(package)
    return Path(module.__file__).parent / relative


def split_sentences(text: str) -> list[str]:
    """Split running text into sentences at ., ! or ? followed by an upper-case start."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


@dataclass(frozen=True)
class Passage:
    docid: str
    article: int
    sentences: tuple[str, ...]


def make_passages(articles: list[str], passage_sentences: int) -> list[Passage]:
    """Cut each article into non-overlapping windows of ``passage_sentences`` sentences (>= 2 kept)."""
    passages = []
    for a, article in enumerate(articles):
        sentences = split_sentences(article)
        for p, start in enumerate(range(0, len(sentences), passage_sentences)):
            window = tuple(sentences[start : start + passage_sentences])
            if len(window) >= 2:
                passages.append(Passage(f"a{a:04d}p{p:02d}", a, window))
    return passages


def build_ict_collection(
    settings: IctSettings,
) -> tuple[list[tuple[str, str]], dict[str, Queries], dict[str, Qrels]]:
    """Build (docs, queries per split, qrels per split) for the ICT task.

    Every passage carries at most one query; a query passage enters the corpus without its
    query sentence (otherwise the task would be exact string matching), the others whole.
    Splits are disjoint in passages and in query texts (:func:`.collection.query_key`: the
    shipped text repeats a few articles word for word, so a passage whose sentence was already
    asked is skipped): test first, then dev, then train.
    """
    with open(shipped_text_path(settings.text), encoding="utf-8") as handle:
        articles = [line.strip() for line in handle if line.strip()]
    passages = make_passages(articles, settings.passage_sentences)
    rng = random.Random(settings.seed)
    order = list(range(len(passages)))
    rng.shuffle(order)

    wanted = {"test": settings.test_queries, "dev": settings.dev_queries, "train": settings.train_queries}
    by_article: dict[int, list[str]] = {}
    for passage in passages:
        by_article.setdefault(passage.article, []).append(passage.docid)

    corpus_text = {p.docid: " ".join(p.sentences) for p in passages}
    queries: dict[str, Queries] = {split: {} for split in wanted}
    qrels: dict[str, Qrels] = {split: {} for split in wanted}
    splits = iter(wanted)
    split = next(splits)
    asked: set[str] = set()  # query texts already asked (the text repeats some articles word for word)
    for index in order:
        while len(queries[split]) >= wanted[split]:
            split = next(splits, None)
            if split is None:
                break
        if split is None:
            break
        passage = passages[index]
        candidates = [
            i for i, s in enumerate(passage.sentences) if len(s.split()) >= settings.min_query_words
        ]
        if not candidates:
            continue
        pick = rng.choice(candidates)
        if query_key(passage.sentences[pick]) in asked:  # one query in two splits, or twice in one
            continue
        asked.add(query_key(passage.sentences[pick]))
        qid = f"{split}-{len(queries[split]):05d}"
        queries[split][qid] = passage.sentences[pick]
        corpus_text[passage.docid] = " ".join(s for i, s in enumerate(passage.sentences) if i != pick)
        judged = {passage.docid: 2}
        if settings.same_article_grade > 0:
            for other in by_article[passage.article]:
                judged.setdefault(other, settings.same_article_grade)
        qrels[split][qid] = judged

    short = {s: (len(queries[s]), wanted[s]) for s in wanted if len(queries[s]) < wanted[s]}
    if short:
        raise ValueError(
            f"dataset.builtin: the text yields too few query passages for {short} (got, wanted); "
            "lower the split sizes or passage_sentences"
        )
    docs = [(p.docid, corpus_text[p.docid]) for p in passages]
    return docs, queries, qrels
