#!/usr/bin/env bash
# Compares kvssd on a file image with RocksDB and fjall on YCSB Load and A-F (docs/compare.md):
# installs what it needs, builds compare/ in release against the system's RocksDB, and runs it
# with this script's arguments (for example: scripts/compare.sh --rounds 1 --workloads load,c).
# Writes results/compare.json and results/compare.svg unless --out says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

# The system's RocksDB (headers and shared library) and libclang, which the bindings are
# generated with. Nothing of RocksDB is compiled from source.
missing=()
dpkg -s librocksdb-dev >/dev/null 2>&1 || missing+=(librocksdb-dev)
command -v clang >/dev/null 2>&1 || missing+=(clang)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "compare: needs ${missing[*]} (RocksDB's headers and library, clang and libclang); install them and run again" >&2
        exit 1
    fi
    echo "compare: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

library=$(dpkg -L librocksdb-dev 2>/dev/null | grep -m1 '/librocksdb\.so$' || true)
if [ -z "$library" ]; then
    echo "compare: librocksdb-dev is installed but no librocksdb.so was found in it" >&2
    exit 1
fi
header=$(dpkg -L librocksdb-dev 2>/dev/null | grep -m1 '/rocksdb/c\.h$' || true)
if [ -z "$header" ]; then
    echo "compare: librocksdb-dev is installed but no rocksdb/c.h was found in it" >&2
    exit 1
fi
echo "compare: RocksDB $(dpkg-query -W -f '${Version}' librocksdb-dev) from $library"

# Link the shared system library and generate the bindings from its own headers.
export ROCKSDB_LIB_DIR
ROCKSDB_LIB_DIR=$(dirname "$library")
export ROCKSDB_INCLUDE_DIR
ROCKSDB_INCLUDE_DIR=$(dirname "$(dirname "$header")")
unset ROCKSDB_STATIC
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build --locked --release --manifest-path compare/Cargo.toml
exec "$CARGO_TARGET_DIR/release/kvssd-compare" "$@"
