#!/usr/bin/env bash
# The main job: build kvssd and benchmark the simulated NAND array of PinK's card (8 channels x 8 ways,
# 8 KiB pages): random reads and sequential programs at queue depth 64, random reads at queue depth 1,
# then the simulator's own speed beside a plain memory copy. Figures are simulated time unless marked
# wall-clock. Extra arguments go to every flash-bench run (e.g. --ops 1000000 --seed 7).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

cargo build --locked --release -p kvssd-cli
kvssd=target/release/kvssd

"$kvssd" flash-bench --profile pink --pattern randread --qd 64 "$@"
"$kvssd" flash-bench --profile pink --pattern seqwrite --qd 64 "$@"
"$kvssd" flash-bench --profile pink --pattern randread --qd 1 "$@"
"$kvssd" flash-bench --profile pink --pattern mixed --qd 64 "$@"
"$kvssd" sim-speed
