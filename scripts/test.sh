#!/usr/bin/env bash
# Installs what pystrobe needs, builds it, and runs the whole test suite:
# unit tests (no root) and BPF integration / end-to-end tests (root), in
# parallel on every core (the e2e files judge nothing by the machine's speed;
# what they share is a RESOURCE_LOCK in tests/e2e/CMakeLists.txt).
# PYSTROBE_SKIP_BPF_TESTS=1 skips, and names, the tests that need BPF.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --tests
# CPython 3.14 and 3.15 (a Debian unstable chroot) and free-threaded builds; see the script.
./scripts/test-pythons.sh
./scripts/build.sh
# The fast tier first: a broken build or unit test fails in minutes. Then
# everything else, the longest first (ctest keeps their last times in
# build/Testing/Temporary/CTestCostData.txt and starts the costly ones early),
# one more at a time than there are cores: the e2e files also wait on their
# programs (a daemon's windows, a sleeping workload), and one more keeps the
# cores busy meanwhile.
ctest --test-dir build --output-on-failure -L fast -j"$(nproc)"
ctest --test-dir build --output-on-failure --timeout 900 -LE fast -j"$(($(nproc) + 1))"
