#!/usr/bin/env bash
# What tests/workflow/test_slurm.py needs to start a real single-node SLURM cluster: Debian's SLURM daemons,
# client and munge (apt), and the SLURM executor plugin (the `slurm` extra of pyproject.toml).
# Idempotent and quiet: a second run installs nothing; output is shown only when a step fails.
#
# The plugin goes into its own directory, .venv/slurm-extra, which only the SLURM test puts on
# PYTHONPATH. Snakemake imports every installed executor plugin on each call, and this one then runs
# `scontrol show config` (up to 10 s where a slurm.conf names a controller that is not running), so
# it stays out of the environment that the rest of the test suite and ./run.sh use.
# On a real cluster install it into the environment instead: pip install -e ".[slurm]".
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA_DIR=.venv/slurm-extra

quietly() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "install_slurm_test_deps: failed: $*" >&2
    return 1
  fi
  rm -f "$log"
}

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install_slurm_test_deps: not root or no apt-get; the real-SLURM test will be skipped" >&2
  exit 0
fi

missing=0
for tool in slurmctld slurmd sbatch srun squeue munged; do
  command -v "$tool" >/dev/null || missing=1
done
if [ "$missing" = 1 ]; then
  # Keep the packages' maintainer scripts from starting daemons (there is no systemd; the test
  # starts its own, with its own configuration, and stops them).
  created_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  status=0
  quietly apt-get update -q || status=$?
  if [ "$status" = 0 ]; then
    quietly apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge || status=$?
  fi
  if [ -n "$created_policy" ]; then
    rm -f /usr/sbin/policy-rc.d
  fi
  [ "$status" = 0 ] || exit "$status"
fi

# The pins are the `slurm` extra of pyproject.toml, installed without dependencies: the plugins' own
# (snakemake interfaces, numpy, pandas, pyyaml, throttler) are already in .venv.
mapfile -t PINS < <(.venv/bin/python -c '
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["slurm"]))')
STAMP="$EXTRA_DIR/.installed"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "${PINS[*]}" ]; then
  rm -rf "$EXTRA_DIR"
  quietly .venv/bin/python -m pip install --no-deps --target "$EXTRA_DIR" "${PINS[@]}"
  echo "${PINS[*]}" >"$STAMP"
fi
