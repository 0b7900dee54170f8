#!/usr/bin/env bash
# Installs the Debian packages pystrobe needs.
#   install-deps.sh          what building pystrobe and the demo need: the
#                            toolchain, the C++ libraries, python3 (the demo's
#                            example program). scripts/demo.sh runs this.
#   install-deps.sh --tests  also what the tests and benchmarks need (GoogleTest,
#                            workloads, a browser, Prometheus, Node.js, peers).
#                            scripts/test.sh runs this.
# Idempotent: safe to run on every invocation of the README commands.
set -euo pipefail

main_packages=(
  # Toolchain and build.
  build-essential cmake ninja-build pkg-config clang llvm
  # BPF: libbpf, bpftool for skeletons, BCC's symbolizer.
  libbpf-dev bpftool libbpfcc-dev libelf-dev zlib1g-dev
  # C++ libraries.
  libabsl-dev libyaml-cpp-dev prometheus-cpp-dev libcivetweb-dev libprotobuf-dev
  protobuf-compiler
  # Push to a profile store over HTTPS and HTTP/2 (TLS, client certificates, proxies).
  libcurl4-openssl-dev
  # The demo's example program.
  python3
)

test_packages=(
  # Unit tests.
  libgtest-dev libgmock-dev
  # Test workloads, the browser that renders our flame graphs, a real
  # Prometheus to scrape the daemon, and Node.js (with npm) for the independent
  # decoders. python3-torch and python3-numpy: the heavy imports users time
  # (record --imports's e2e test imports them).
  python3-yaml python3-numpy python3-torch chromium prometheus nodejs systemd
  # Graphviz: `report --dot`'s e2e test renders the call graph with `dot -Tsvg`.
  graphviz
  # The push tests' own certificate authority.
  openssl
  # The OTLP tests' receivers: gRPC, and message classes generated from the
  # published .proto files (protoc --python_out).
  python3-grpcio python3-protobuf
  # A peer the allocation benchmark compares with (tests/bench/run_allocations_cost.py).
  python3-scalene
  # The in-kernel reference of the kernel-cost and memory benchmarks
  # (tests/bench/run_kernel_ratio.py, run_memory_cost.py).
  bpftrace
)

packages=("${main_packages[@]}")
case "${1:-}" in
  "") ;;
  --tests) packages+=("${test_packages[@]}") ;;
  --list) printf '%s\n' "${main_packages[@]}"; exit 0 ;;
  --list-tests) printf '%s\n' "${main_packages[@]}" "${test_packages[@]}"; exit 0 ;;
  *) echo "usage: install-deps.sh [--tests | --list | --list-tests]" >&2; exit 2 ;;
esac

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
