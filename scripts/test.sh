#!/usr/bin/env bash
# Installs what pystrobe needs, builds it, and runs the whole test suite:
# unit tests (no root) and BPF integration / end-to-end tests (root).
# PYSTROBE_SKIP_BPF_TESTS=1 skips, and names, the tests that need BPF.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# CPython 3.14 and 3.15 (a Debian unstable chroot) and free-threaded builds; see the script.
./scripts/test-pythons.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 900
