#!/usr/bin/env bash
# Install the pinned real host CLIs (Claude Code and OpenCode) for the realhost tests
# into atlante-eval's managed host cache, and print the cache's directory on stdout.
#
#   ATLANTE_EVAL_HOST_CACHE="$(bash tools/install_hosts.sh)"
#
# Runs `atlante-eval hosts install` (so `pip install -e '.[dev]'` comes first): a version
# already in the cache is only checked against its recorded integrity; a missing or
# corrupted one is installed with npm. The cache is $ATLANTE_EVAL_HOST_CACHE, else
# .cache/host-cache in the repository. Everything but the directory goes to stderr.
# Keep the pins in sync with tests/realhost/hosts.py (a test checks they match).
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.332"
OPENCODE_VERSION="1.18.33"

root="$(cd "$(dirname "$0")/.." && pwd)"
ATLANTE_EVAL_HOST_CACHE="${ATLANTE_EVAL_HOST_CACHE:-$root/.cache/host-cache}"
export ATLANTE_EVAL_HOST_CACHE

if ! command -v atlante-eval >/dev/null 2>&1; then
    echo "install_hosts: atlante-eval is not on PATH; run pip install -e '.[dev]' first" >&2
    exit 1
fi
atlante-eval hosts install "claude-code@$CLAUDE_CODE_VERSION" "opencode@$OPENCODE_VERSION" >&2
echo "$ATLANTE_EVAL_HOST_CACHE"
