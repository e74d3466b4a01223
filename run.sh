#!/usr/bin/env bash
# Install, then run the whole workflow on the embedded default (config.yaml) on 2 cores.
# Extra arguments go to snakemake, e.g. ./run.sh --configfile config.paper.yaml -n
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
# Rule shells call `python`: the venv's, also without an activated venv.
export PATH="$PWD/.venv/bin:$PATH" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/snakemake --cores 2 "$@"
.venv/bin/snakemake --cores 1 --report results/report.html "$@"
