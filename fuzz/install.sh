#!/usr/bin/env bash
# Installs what `make fuzz` needs, and nothing if it is already there:
# cargo-afl (pinned; it must match fuzz/afl/Cargo.toml's `afl`) from
# crates.io, and AFL++ built from the source cargo-afl bundles, for the
# machine's stable toolchain. Needs only cargo, a C compiler and make.
set -euo pipefail

VERSION=0.18.2

if ! cargo afl --version 2>/dev/null | grep -q "^cargo-afl ${VERSION}\b"; then
  echo "fuzz/install.sh: installing cargo-afl ${VERSION}"
  command -v cc >/dev/null 2>&1 || { echo "error: no C compiler (apt-get install build-essential)" >&2; exit 1; }
  command -v make >/dev/null 2>&1 || { echo "error: no make (apt-get install make)" >&2; exit 1; }
  cargo install --locked --force cargo-afl --version "${VERSION}"
fi

# cargo-afl builds AFL++ and its runtime for the active toolchain, usually at
# install time; a toolchain that changed since needs `config --build`.
if ! out=$(cargo afl config --build 2>&1); then
  if ! grep -q "already built" <<<"${out}"; then
    printf '%s\n' "${out}" >&2
    echo "error: cargo afl config --build failed" >&2
    exit 1
  fi
fi
cargo afl --version
