#!/usr/bin/env bash
# Compile the windowed-attention extension's CUDA build on a machine without a GPU, from PyPI alone,
# and record the result in benchmarks/results/cuda_extension_build.md (benchmarks/cuda_extension_build.py).
#
# In a throwaway venv (never the repo's .venv; removed afterwards unless KEEP_VENV=1) it installs
# PyPI's torch==2.13.0 (the CUDA build, several GB with its nvidia-* wheels), then nvcc and the
# CUDA C++ headers (nvidia-cuda-nvcc, -cccl, -crt, nvidia-nvvm) of the CUDA release torch was built for,
# points CUDA_HOME at the wheels' toolkit directory and builds for TORCH_CUDA_ARCH_LIST
# (default "8.0;9.0": A100, H100), as a login node does before GPU jobs load the build.
# Settings (environment variables):
#   WORK          where the venv and the build go (default: a new directory under /tmp)
#   PIP_OPTIONS   options for every pip call (default --isolated: a site pip configuration that
#                 offers a CPU wheel of torch 2.13.0, whose local version "+cpu" pip prefers, is
#                 ignored; PIP_CERT is passed on)
#   MAX_JOBS      parallel compile jobs (default 1)
#   KEEP_VENV     1: keep WORK afterwards
#   OUT           the report (default benchmarks/results/cuda_extension_build.md)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=${WORK:-$(mktemp -d /tmp/cuda-extension-XXXXXX)}
OUT=${OUT:-$REPO/benchmarks/results/cuda_extension_build.md}
NEED_GB=15
free_gb=$(df -Pk "$WORK" | awk 'NR == 2 {print int($4 / 1048576)}')
if [ "$free_gb" -lt "$NEED_GB" ]; then
  echo "compile_cuda_extension.sh: $WORK has $free_gb GB free; torch's CUDA build needs about $NEED_GB GB (set WORK)" >&2
  exit 1
fi
[ "${KEEP_VENV:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
read -r -a OPTIONS <<< "${PIP_OPTIONS---isolated}${PIP_CERT:+ --cert $PIP_CERT}"
PY="$WORK/venv/bin/python"
[ -x "$PY" ] || "${PYTHON:-python3.11}" -m venv "$WORK/venv"
PIP=("$PY" -m pip "${OPTIONS[@]}")
start=$(date +%s)
"${PIP[@]}" install -q torch==2.13.0 ninja
CUDA=$("$PY" -c "import torch; print(torch.version.cuda or '')")
if [ -z "$CUDA" ]; then
  echo "compile_cuda_extension.sh: pip installed a CPU build of torch ($("$PY" -c 'import torch; print(torch.__version__)')); set PIP_OPTIONS" >&2
  exit 1
fi
# nvcc's own dependencies (its front end, nvvm, and the crt headers) are not pinned by it: pin them
# to the same release, or pip takes the newest
"${PIP[@]}" install -q "nvidia-cuda-nvcc==$CUDA.*" "nvidia-cuda-cccl==$CUDA.*" "nvidia-nvvm==$CUDA.*" \
  "nvidia-cuda-crt==$CUDA.*"
# cuobjdump (to list the GPU code built) has no release for every minor version: the major's newest
"${PIP[@]}" install -q "nvidia-cuda-cuobjdump==${CUDA%%.*}.*" || echo "compile_cuda_extension.sh: no cuobjdump" >&2
install_s=$(($(date +%s) - start))
SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
NVCC=$(find "$SITE/nvidia" -path '*/bin/nvcc' -type f | head -1)
export CUDA_HOME=${NVCC%/bin/nvcc}
# torch links -L$CUDA_HOME/lib64 -lcudart; the wheels ship lib/libcudart.so.<major> only
[ -e "$CUDA_HOME/lib64" ] || ln -s lib "$CUDA_HOME/lib64"
[ -e "$CUDA_HOME/lib/libcudart.so" ] || ln -s "$(basename "$(ls "$CUDA_HOME"/lib/libcudart.so.* | head -1)")" "$CUDA_HOME/lib/libcudart.so"
export PATH="$CUDA_HOME/bin:$PATH" TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-8.0;9.0} MAX_JOBS=${MAX_JOBS:-1}
export RERANK_SCALING_BUILD_DIR="$WORK/build" PYTHONPATH="$REPO/src"
"$PY" benchmarks/cuda_extension_build.py --install-seconds "$install_s" --out "$OUT"
