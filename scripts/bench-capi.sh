#!/usr/bin/env bash
# What libkvssd's calls cost on the wall clock, and what pacing makes of the simulated card's
# latencies: builds the release library and crates/capi/bench/kvs_bench.c, then runs it on a file
# image, on a simulated card (PinK's, 32 blocks per die: 4 GiB) without pacing, and with pacing.
# Wall-clock figures need an idle machine (on a shared one: /work/bin/quiet scripts/bench-capi.sh).
# COUNT pairs per run (default 5000; the file run uses a fifth, as each store waits for fdatasync).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
count="${1:-5000}"
cargo build --locked --release -p kvssd-capi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cc -std=c11 -D_DEFAULT_SOURCE -O2 -Wall -Wextra -I crates/capi/include crates/capi/bench/kvs_bench.c \
    -L target/release -lkvssd -pthread -o "$work/kvs_bench"
export LD_LIBRARY_PATH="$PWD/target/release"
"$work/kvs_bench" "$work/bench.img?create&blocks-per-die=32" "$((count / 5))"
"$work/kvs_bench" "sim:pink?blocks-per-die=32&queue-depth=32" "$count"
"$work/kvs_bench" "sim:pink?blocks-per-die=32&queue-depth=32&pacing" "$count"
