#!/usr/bin/env bash
# What the browser tests (tests/report/test_browser.py, the report test of tests/workflow/test_workflow.py) and
# scripts/readme_screenshot.py need: Debian's headless-capable Chromium (apt). Idempotent and quiet:
# a second run installs nothing; output is shown only when a step fails. Without root or apt-get it
# installs nothing and the browser tests are skipped, saying why.
set -euo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser_test_deps: not root or no apt-get; the browser tests will be skipped" >&2
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install_browser_test_deps: apt-get install chromium failed; the browser tests will be skipped" >&2
fi
