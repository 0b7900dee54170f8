#!/usr/bin/env bash
# Configures and builds pystrobe into ./build (binary: build/pystrobe).
#   build.sh             everything: the binary and every test (RelWithDebInfo)
#   build.sh --no-tests  the binary alone, without debug information: what the
#                        demo needs, about a quarter less compile time (no
#                        GoogleTest needed); a later build.sh rebuilds it all
set -euo pipefail
cd "$(dirname "$0")/.."
config=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON)
targets=()
if [ "${1:-}" = "--no-tests" ]; then
  config=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"
          -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DBUILD_TESTING=OFF)
  targets=(--target pystrobe)
fi
# Ninja: with nothing to do it answers in a fraction of a second, where Make
# takes 10 s over our 118 targets (the test command builds before each run).
# A build folder keeps the generator it was made with.
[ -f build/CMakeCache.txt ] || config+=(-G Ninja)
cmake -S . -B build "${config[@]}" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
