#!/usr/bin/env bash
# The main job: build kvssd and run the default benchmark suite, PinK's YCSB experiments side by side
# on identical simulated devices (pink, lightstore, hash; Load and A-F), on the default profile (PinK's
# card scaled to 4 GiB, same shape). Prints the table, and writes results/ycsb.json and the plots in
# results/ycsb/ (open results/ycsb/index.html). Figures are simulated time unless marked wall-clock.
# Needs about 10 GiB of memory (three 4 GiB simulated devices) and a few minutes on two cores.
# Extra arguments go to `kvssd bench ycsb` (e.g. --records 500000 --ops 20000 for a quick look).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

cargo build --locked --release -p kvssd-cli
mkdir -p results
target/release/kvssd bench ycsb --presets pink,lightstore,hash \
    --json results/ycsb.json --report results/ycsb "$@"
