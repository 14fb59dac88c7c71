#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings are errors)"
cargo clippy --locked --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --locked --workspace
