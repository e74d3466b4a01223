#!/usr/bin/env bash
# Run by Snakemake inside the new retrieval environment (--sdm conda): pyserini only for the
# Anserini jar it bundles, without its dependencies (an OpenAI client, faiss, onnxruntime, torch).
set -euo pipefail
python -m pip install --no-deps "pyserini==1.6.0"
