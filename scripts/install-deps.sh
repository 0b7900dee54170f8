#!/usr/bin/env bash
# Installs every Debian package pystrobe needs to build, test and benchmark.
# Idempotent: safe to run on every invocation of the README commands.
set -euo pipefail

packages=(
  # Toolchain and build.
  build-essential cmake pkg-config clang llvm
  # BPF: libbpf, bpftool for skeletons, BCC's symbolizer.
  libbpf-dev bpftool libbpfcc-dev libelf-dev zlib1g-dev
  # C++ libraries.
  libabsl-dev libgtest-dev libgmock-dev libyaml-cpp-dev prometheus-cpp-dev libcivetweb-dev
  libprotobuf-dev protobuf-compiler
  # Push to a profile store over HTTPS (TLS, client certificates, proxies).
  libcurl4-openssl-dev
  # Test workloads, the browser that renders our flame graphs, a real
  # Prometheus to scrape the daemon, and Node.js (with npm) for the independent
  # decoders. python3-torch and python3-numpy: the heavy imports users time
  # (record --imports's e2e test imports them).
  python3 python3-yaml python3-numpy python3-torch chromium prometheus nodejs systemd
  # Graphviz: `report --dot`'s e2e test renders the call graph with `dot -Tsvg`.
  graphviz
  # The push tests' own certificate authority.
  openssl
  # A peer the allocation benchmark compares with (tests/bench/run_allocations_cost.py).
  python3-scalene
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: run as root (apt-get needs it)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
