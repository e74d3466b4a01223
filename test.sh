#!/usr/bin/env bash
# Install, then run the whole test suite (slow end-to-end tests included).
# Quick subset: .venv/bin/python -m pytest -m "not slow"
set -euo pipefail
cd "$(dirname "$0")"
BUILD_EXTENSION=1 scripts/install.sh  # the kernel tests load the compiled extension
if [ -x scripts/install_slurm_test_deps.sh ]; then
  scripts/install_slurm_test_deps.sh
fi
scripts/install_browser_test_deps.sh
# Rules call the interpreter that runs Snakemake by its absolute path (rules/common.smk); the venv on
# PATH is for the commands the tests and tools run by name.
export PATH="$PWD/.venv/bin:$PATH" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/python -m pytest -p no:cacheprovider "$@"
