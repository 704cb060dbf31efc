#!/usr/bin/env bash
# Builds the JSONL-import fuzz target with clang's libFuzzer (+ASan/UBSan) and runs it for a
# bounded time (default 60 s) on a seed corpus of valid and broken records.
# usage: scripts/fuzz_import.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}" out="${2:-build/fuzz}"
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$cxx" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-14
  cxx=clang++-14
fi
mkdir -p "$out/corpus"
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I src -I . \
  tests/fuzz/import_fuzzer.cpp tuning_db/sqlite.cpp tuning_db/keys.cpp tuning_db/database.cpp \
  src/support/error.cpp src/support/target.cpp -lsqlite3 -o "$out/import_fuzzer"
cat > "$out/corpus/valid.jsonl" <<'JSONL'
{"config":{"mr":8,"nr":32},"created_at":"2026-11-30T00:00:00Z","format":"tunec-record","host":"h","result":{"error":"","gflops":100.0,"median_us":10.0,"min_us":9.0,"repeats":5,"status":"ok"},"target":{"cores":2,"isa":["avx2","fma"],"l1d":49152,"l2":1048576,"l3":33554432,"model":"cpu"},"template_version":1,"tunec_version":"0.1.0","version":1,"workload":{"k":64,"m":64,"n":64,"template":"matmul"}}
JSONL
printf '{"format":"tunec-record","version":1}\n[1,2]\n{"a":\n' > "$out/corpus/broken.jsonl"
"$out/import_fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 "$out/corpus" 2>&1 | tail -15
