#!/usr/bin/env bash
# Measures `kvssd serve` with redis-benchmark under each sync policy, beside redis-server with
# appendfsync set to match (always / everysec / no), on this machine's file system. Prints one
# line per run: what ran, the exact redis-benchmark command, SET and GET requests per second.
#
#   scripts/bench-serve.sh [REQUESTS [KEYSPACE]]
#
# REQUESTS defaults to 1000000 (--sync every runs SET on 20000, since each SET waits for its own
# fdatasync). Without KEYSPACE redis-benchmark uses one key, so the runs measure the server and its
# log, not the index; with it (`-r KEYSPACE`) keys are drawn from that many, and the index flushes
# and compacts.
#
# Installs redis-tools and redis-server from the system's packages when missing. Uses ports
# 7301-7310 and a temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-1000000}"
keyspace="${2:+-r $2}"
every_set_requests=20000
if ! command -v redis-benchmark >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq redis-tools redis-server
fi
cargo build --locked --release -p kvssd-cli >/dev/null
kvssd="${CARGO_TARGET_DIR:-target}/release/kvssd"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

wait_port() {
    for _ in $(seq 100); do
        redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "bench-serve: nothing answers on port $1" >&2
    return 1
}

# bench LABEL PORT TESTS N: one redis-benchmark run; prints the label and the rates.
bench() {
    local label="$1" port="$2" tests="$3" n="$4"
    local command="redis-benchmark -p $port -t $tests -n $n $keyspace -P 16 -c 50 -q"
    local rates
    rates="$($command 2>&1 | tr '\r' '\n' | grep 'requests per second' | sed 's/ requests per second,/ rps/' | tr '\n' ' ')"
    printf '%-44s %-58s %s\n' "$label" "$command" "$rates"
}

port=7301
for sync in group none every; do
    "$kvssd" serve "$work/image-$sync" --profile pink --blocks-per-die 32 --port "$port" \
        --sync "$sync" >"$work/serve-$sync.log" 2>&1 &
    pid=$!
    wait_port "$port"
    if [ "$sync" = every ]; then
        bench "kvssd serve --sync $sync" "$port" set "$every_set_requests"
        bench "kvssd serve --sync $sync" "$port" get "$requests"
    else
        bench "kvssd serve --sync $sync" "$port" set,get "$requests"
    fi
    kill -TERM "$pid"
    wait "$pid"
    port=$((port + 1))
done

for fsync in always everysec no; do
    redis-server --port "$port" --dir "$work" --save "" --appendonly yes \
        --appendfilename "aof-$fsync" --appenddirname "aof-$fsync" --appendfsync "$fsync" \
        --daemonize no >"$work/redis-$fsync.log" 2>&1 &
    pid=$!
    wait_port "$port"
    bench "redis-server appendfsync $fsync" "$port" set,get "$requests"
    kill -TERM "$pid"
    wait "$pid" || true
    port=$((port + 1))
done
