#!/usr/bin/env bash
# Install, then run the whole workflow on the embedded default (config.yaml) on 2 cores.
# Extra arguments go to snakemake, e.g. ./run.sh --configfile config.paper.yaml -n
#   ./run.sh --prefetch [--pin] --configfile config.paper.yaml
# downloads every model and dataset the config names into the Hugging Face and ir_datasets caches
# (run it where there is internet, e.g. a cluster's login node); compute jobs then run offline
# (their rules set HF_HUB_OFFLINE=1). With HF_HUB_OFFLINE=1 already set it only checks the caches.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
# Rules call the interpreter that runs Snakemake by its absolute path (rules/common.smk); the venv on
# PATH is for the commands the tests and tools run by name.
export PATH="$PWD/.venv/bin:$PATH" TOKENIZERS_PARALLELISM=false
if [[ "${1:-}" == "--prefetch" ]]; then
  shift
  if [[ "${1:-}" == "--pin" ]]; then
    # resolve each hub model named without a revision and write its commit to models.lock.yaml,
    # which every later run reads (rerank_scaling/hub/pins.py)
    shift
    export RERANK_SCALING_PIN=1
  fi
  exec .venv/bin/snakemake prefetch --force --cores 1 "$@"  # the target first: --configfile takes several values
fi
.venv/bin/snakemake --cores 2 "$@"
for arg in "$@"; do  # a dry run (./run.sh -n) shows the plan: there are no results to report on yet
  case "$arg" in -n | -np | -pn | --dry-run | --dryrun) exit 0 ;; esac
done
.venv/bin/snakemake --cores 1 --report results/report.html "$@"
