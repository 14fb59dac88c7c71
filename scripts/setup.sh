#!/usr/bin/env bash
# Makes sure a Rust toolchain and a C compiler that can build kvssd are on this machine, installing
# them if they are missing.
# kvssd needs Rust 1.85 or newer (edition 2021, workspace lints) and the crates in Cargo.lock, which
# cargo fetches from crates.io on the first build.
set -euo pipefail

required_minor=85

have_rust() {
    command -v cargo >/dev/null 2>&1 || return 1
    local minor
    minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
    [ "${minor:-0}" -ge "$required_minor" ]
}

if [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

if ! have_rust; then
    echo "setup: no Rust 1.$required_minor+ found; trying rustup, then the system's packages" >&2
    if command -v rustup >/dev/null 2>&1; then
        rustup toolchain install stable --profile minimal --component rustfmt,clippy
        rustup default stable
    elif command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        apt-get install -y -qq cargo rustc rustfmt rust-clippy
    fi
fi

if ! have_rust; then
    echo "setup: kvssd needs Rust 1.$required_minor or newer (cargo, rustfmt, clippy); install it from https://rustup.rs and run again" >&2
    exit 1
fi

for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        if command -v rustup >/dev/null 2>&1; then
            rustup component add "$component"
        fi
    fi
done

# A C compiler and make: the program's allocator (jemalloc) is built from source with them, and
# libkvssd's C tests with the compiler.
if ! command -v "${CC:-cc}" >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
    echo "setup: no C compiler or no make; installing gcc and make" >&2
    apt-get update -qq
    apt-get install -y -qq gcc libc6-dev make
fi
