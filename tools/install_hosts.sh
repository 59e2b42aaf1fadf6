#!/usr/bin/env bash
# Install the pinned real host CLIs (Claude Code and OpenCode) for the realhost tests
# into the git-ignored cache .cache/hosts, and print their bin directory on stdout.
#
#   ATLANTE_EVAL_HOST_BIN_DIR="$(bash tools/install_hosts.sh)"
#
# Skips npm when the cache already holds exactly the pinned versions. Everything but
# the bin directory goes to stderr. Override the cache with ATLANTE_EVAL_HOSTS_PREFIX.
# Keep the pins in sync with tests/realhost/hosts.py (a test checks they match).
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.332"
OPENCODE_VERSION="1.18.33"

root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${ATLANTE_EVAL_HOSTS_PREFIX:-$root/.cache/hosts}"

installed_version() {
    # installed_version <prefix> <package>: the version in its package.json, or nothing.
    local manifest="$1/node_modules/$2/package.json"
    [ -f "$manifest" ] || return 0
    sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$manifest" | head -n 1
}

is_current() {
    # is_current <prefix>: the pinned versions and both executables are there.
    [ "$(installed_version "$1" @anthropic-ai/claude-code)" = "$CLAUDE_CODE_VERSION" ] &&
        [ "$(installed_version "$1" opencode-ai)" = "$OPENCODE_VERSION" ] &&
        [ -x "$1/node_modules/.bin/claude" ] && [ -x "$1/node_modules/.bin/opencode" ]
}

if ! is_current "$prefix"; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "install_hosts: npm is not on PATH; install Node.js and npm first" >&2
        exit 1
    fi
    staging="$prefix.staging-$$"
    rm -rf "$staging"
    mkdir -p "$staging"
    trap 'rm -rf "$staging"' EXIT
    echo "install_hosts: installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" \
        "opencode-ai@$OPENCODE_VERSION into $prefix" >&2
    # Claude Code 2.1.198+ declares node >= 22; the native binary runs on older Node anyway.
    npm install --prefix "$staging" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "opencode-ai@$OPENCODE_VERSION" >&2
    if ! is_current "$staging"; then
        echo "install_hosts: npm did not install the pinned versions" >&2
        exit 1
    fi
    rm -rf "$prefix"
    mkdir -p "$(dirname "$prefix")"
    mv "$staging" "$prefix"
    trap - EXIT
fi

bin_dir="$prefix/node_modules/.bin"
"$bin_dir/claude" --version >&2
"$bin_dir/opencode" --version >&2
echo "$bin_dir"
