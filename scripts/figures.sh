#!/usr/bin/env bash
# Regenerates docs/figures.md, the one place the docs take measured figures from: runs each
# benchmark below with --json into results/figures/, then turns the JSON into tables with
# `kvssd report figures`, each table headed by the command that produced it. Every figure is
# simulated time, a pure function of the command and its seed, so a re-run on unchanged code gives
# the same file. Takes a few minutes and about 10 GiB of memory on two cores.
#
#   scripts/figures.sh             run the benchmarks, then write docs/figures.md
#   scripts/figures.sh --no-run    only rewrite docs/figures.md from results/figures/*.json
set -euo pipefail
cd "$(dirname "$0")/.."

# name | command (as a reader would type it; run with --json results/figures/NAME.json)
RUNS=(
    "ycsb|kvssd bench ycsb --presets pink,lightstore,hash"
    "ycsb-search|kvssd bench ycsb --presets pink-noopt,pink-range,pink --workloads load,c"
    "ycsb-hw|kvssd bench ycsb --presets pink,pink-hw --workloads load,a,f"
    "ycsb-e10|kvssd bench ycsb --presets pink,lightstore,hash --workloads load,e --scan-length-max 10"
    "gc|kvssd bench gc --presets pink,pink-gcrewrite,lightstore --records 1000000 --overwrites 3000000"
    "seek|kvssd bench seek --prefetch 0,8"
)

run=true
if [[ "${1:-}" == "--no-run" ]]; then
    run=false
fi

. scripts/setup.sh
cargo build --locked --release -p kvssd-cli
mkdir -p results/figures
report=()
for entry in "${RUNS[@]}"; do
    name=${entry%%|*}
    command=${entry#*|}
    json=results/figures/$name.json
    if $run; then
        echo "== $command" >&2
        # The command's words, with the program replaced by the build just made.
        read -r -a words <<<"$command"
        target/release/kvssd "${words[@]:1}" --quiet --json "$json"
    fi
    report+=(--json "$json" --command "$command")
done
target/release/kvssd report figures "${report[@]}" --out docs/figures.md
