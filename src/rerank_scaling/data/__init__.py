"""Data stages: the local collection format, datasets and the built-in collection, TREC I/O, BM25
retrieval, training examples, and the prefetch of models and datasets.

Entry points: :mod:`.prepare_data`, :mod:`.bm25_retrieve`, :mod:`.build_examples`, :mod:`.prefetch`.
"""
