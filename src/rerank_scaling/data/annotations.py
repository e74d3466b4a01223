"""Annotation sources of the training examples (Fang et al., Scaling Laws for Dense Retrieval §4.3): the
collection's own judgements, or Inverse Cloze Task (ICT) pseudo-queries built from the same judged passages.

``ict`` (Lee et al. 2019; Fang et al., Scaling Laws for Dense Retrieval): for each human-judged (query,
relevant passage) pair of the training examples, a sentence of the passage becomes the query and the passage
without it the positive; the BM25 negatives of the human query stay, so the two sources share queries (ids,
hence the nested subsets of :mod:`.subsets`), passages and negatives and differ only in who wrote the
query and how much of the passage is left. The sentence is drawn per passage (seeded by
``examples.seed`` and the passage id), so a passage judged for several queries gives one text.
Evaluation always uses the collection's human qrels of dev/test.
"""

from __future__ import annotations

import random

import pandas as pd

from rerank_scaling.data.ict import split_sentences

#: A query sentence has at least this many words (shorter ones are headings or fragments).
MIN_QUERY_WORDS = 4


def ict_split(docid: str, passage: str, seed: int) -> tuple[str, str] | None:
    """(pseudo-query, passage without it), or None for a passage with fewer than two sentences or
    no sentence of ``MIN_QUERY_WORDS`` words."""
    sentences = split_sentences(passage)
    candidates = [i for i, s in enumerate(sentences) if len(s.split()) >= MIN_QUERY_WORDS]
    if len(sentences) < 2 or not candidates:
        return None
    pick = random.Random(f"{seed}/{docid}").choice(candidates)
    return sentences[pick], " ".join(s for i, s in enumerate(sentences) if i != pick)


class TooShortToSplit(ValueError):
    """No relevant passage of the training examples can be split into a query and a rest."""


def _too_short(positives: int) -> TooShortToSplit:
    return TooShortToSplit(
        f"training.annotations: 'ict' needs relevant passages of at least two sentences (one of >= "
        f"{MIN_QUERY_WORDS} words becomes the query), but none of the {positives} judged training "
        "passages has them; remove 'ict' from training.annotations for this collection"
    )


def ict_groups(groups: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, int]:
    """ICT rows of ``groups`` (training_examples' group schema): (rows, rows dropped as unsplittable)."""
    rows, dropped = [], 0
    for row in groups.to_dict("records"):
        split = ict_split(row["docids"][0], row["documents"][0], seed)
        if split is None:
            dropped += 1
            continue
        query, rest = split
        rows.append({**row, "query": query, "documents": [rest, *list(row["documents"])[1:]]})
    if groups.shape[0] and not rows:
        raise _too_short(len(groups))
    return pd.DataFrame(rows, columns=groups.columns), dropped


def ict_pointwise(pointwise: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, int]:
    """ICT rows of ``pointwise`` (each positive row followed by its negatives: training_examples'
    pointwise schema): the block of a positive gets its pseudo-query; blocks whose positive cannot
    be split are dropped. Returns (rows, positives dropped)."""
    block = (pointwise["label"] > 0).cumsum()
    frames, dropped = [], 0
    for _, rows in pointwise.groupby(block, sort=True):
        positive = rows.iloc[0]
        split = ict_split(positive["docid"], positive["document"], seed)
        if split is None:
            dropped += 1
            continue
        query, rest = split
        rows = rows.assign(query=query)
        rows.iloc[0, rows.columns.get_loc("document")] = rest
        frames.append(rows)
    if len(pointwise) and not frames:
        raise _too_short(int((pointwise["label"] > 0).sum()))
    kept = pd.concat(frames, ignore_index=True) if frames else pointwise.iloc[:0]
    return kept, dropped
