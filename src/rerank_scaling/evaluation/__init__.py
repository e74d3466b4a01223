"""Evaluation stages: rerank BM25 candidates with each checkpoint, score them with every metric, and
merge the per-run tables into the long metric table.

Entry points: :mod:`.evaluate`, :mod:`.merge_metrics`.
"""
