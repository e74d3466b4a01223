"""rerank-scaling: measure and forecast how cross-encoder rerankers scale.

One module per concern; each pipeline stage has a small entry point under
:mod:`rerank_scaling.stages` that a Snakemake rule calls.
"""

__version__ = "0.1.0"
