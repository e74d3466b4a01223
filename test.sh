#!/usr/bin/env bash
# Install, then run the whole test suite (slow end-to-end tests included).
# Quick subset: .venv/bin/python -m pytest -m "not slow". Test files run on TEST_WORKERS processes
# (pytest-xdist, default 2; each file stays on one, so a module's shared workflow run is made once):
# the end-to-end tests spend much of their time in process start-up and SLURM's polling back-off.
# A third worker on 2 cores was tried: each test ran so much longer that the suite was slower, and
# three workflow modules at once held about twice the disk that TEST_DISK_GB allows for.
set -euo pipefail
cd "$(dirname "$0")"
# The end-to-end tests write workflow copies and checkpoints under the temporary folder: 4.4 GB at
# their peak (du every 10 s over a full run of a fresh clone, 4dc85b7); a full disk fails them all.
python3 scripts/check_free_space.py --path "${TMPDIR:-/tmp}" --need-gb "${TEST_DISK_GB:-6}" \
  --for "./test.sh: the test suite" \
  --fix "Free space there (old /tmp/pytest-of-$(id -un) folders?) or point TMPDIR at a larger disk."
BUILD_EXTENSION=1 scripts/install.sh  # the kernel tests load the compiled extension
if [ -x scripts/install_slurm_test_deps.sh ]; then
  scripts/install_slurm_test_deps.sh
fi
scripts/install_browser_test_deps.sh
# Rules call the interpreter that runs Snakemake by its absolute path (rules/common.smk); the venv on
# PATH is for the commands the tests and tools run by name.
export PATH="$PWD/.venv/bin:$PATH" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Modules go to workers slowest first (tests/conftest.py reads tests/module_seconds.json, written by
# benchmarks/suite_time.py costs), in that order: --no-loadscope-reorder keeps xdist from re-sorting
# them by their number of tests, which queued the few-test, slowest workflow modules last.
.venv/bin/python -m pytest -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
  --durations=25 "$@"
