#!/usr/bin/env bash
# Installs what building pystrobe needs (not the test packages), builds the
# binary alone, and records a CPU profile of the bundled example program into
# ./pystrobe-example.svg (open it in a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh --no-tests
./build/pystrobe record --rate 199 --threads -o pystrobe-example.svg -- \
  python3 examples/word_census.py
echo "Open $(pwd)/pystrobe-example.svg in a browser to explore the flame graph."
