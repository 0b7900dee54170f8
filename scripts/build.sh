#!/usr/bin/env bash
# Configures and builds pystrobe into ./build (binary: build/pystrobe).
#   build.sh             everything: the binary and every test
#   build.sh --no-tests  the binary only (what the demo needs; no GoogleTest)
set -euo pipefail
cd "$(dirname "$0")/.."
testing=ON
targets=()
if [ "${1:-}" = "--no-tests" ]; then
  testing=OFF
  targets=(--target pystrobe)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING="$testing" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
