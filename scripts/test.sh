#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, the docs, then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings are errors)"
cargo clippy --locked --workspace --all-targets -- -D warnings
echo "== cargo doc (warnings are errors: broken links, private links, stray HTML)"
# The CLI's binary and the C library both produce a `kvssd` crate's docs, so they are built apart.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps --lib --quiet
RUSTDOCFLAGS="-D warnings" cargo doc --locked -p kvssd-cli --no-deps --bins --quiet
echo "== libkvssd (release), for its C tests (scripts/setup.sh made sure of a C compiler)"
cargo build --locked --release -p kvssd-capi
echo "== redis-benchmark, which the server's tests run against kvssd serve"
if ! command -v redis-benchmark >/dev/null 2>&1; then
    echo "test: no redis-benchmark; installing redis-tools" >&2
    apt-get update -qq
    apt-get install -y -qq redis-tools
fi
echo "== cargo test"
cargo test --locked --workspace
echo "== crash harness: crash points survived, by durability mode and preset"
cargo test --locked -p kvssd-device --test crash_harness -- --nocapture 2>&1 | grep -E "crash pass|crash points in all|test result"
