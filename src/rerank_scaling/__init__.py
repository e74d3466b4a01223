"""rerank-scaling: measure and forecast how cross-encoder rerankers scale.

One subpackage per stage family, named like the rule files; each holds the library of its stages
and their entry points, the small programs a Snakemake rule calls (``python -m
rerank_scaling.<family>.<stage>``):

* :mod:`.data`: collection format, datasets, built-in collection, TREC I/O, BM25, training examples,
  the prefetch of what a config names (rules/data.smk, rules/retrieve.smk, rules/prefetch.smk);
* :mod:`.training`: models, the training run, checkpoints, the sparse encoder and the windowed-attention
  extension (rules/train.smk);
* :mod:`.evaluation`: reranking, metrics, checkpoint evaluation, the merged table (rules/evaluate.smk);
* :mod:`.laws`: law forms, fitting, statistics, protocols, backtests, allocation, tables (rules/fit.smk);
* :mod:`.planning`: costs, budget allocation and ROI choice, the plan's table and figures (rules/plan.smk);
* :mod:`.report`: figures and the summary (rules/report.smk).

The modules at the top are shared: the config and its checks, the run grid, atomic writes, settings
parsing, the metric table's records, the Hugging Face cache.
"""

__version__ = "0.1.0"
