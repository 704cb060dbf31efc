#!/usr/bin/env bash
# Benchmarks tunec's kernels next to Debian's OpenBLAS and oneDNN on the same shapes, in one
# run, and writes the table to docs/benchmarks.md (see scripts/bench_ops.py --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
missing=()
for p in libdnnl-dev libopenblas-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi
g++ -O2 -std=c++17 -I/usr/include/x86_64-linux-gnu/openblas-pthread scripts/bench/baselines.cpp \
  -o build/bench_baselines -lopenblas -ldnnl
exec /usr/bin/python3 scripts/bench_ops.py "$@"
