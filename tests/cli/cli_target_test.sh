#!/usr/bin/env bash
# Targets (DESIGN.md, decision 10): the key is what the machine is (the same under taskset),
# records tuned in one shell apply under taskset, target files build for another machine, and
# malformed or foreign target files are clear errors.
set -uo pipefail
tunec="$1" src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ex="$src/examples/tiny_cnn"
export TUNEC_DB="$tmp/default.db"

check() { # check DESCRIPTION COMMAND...: the command must succeed
  local what="$1"
  shift
  checks=$((checks + 1))
  if ! "$@" >"$tmp/out" 2>&1; then
    echo "FAIL: $what"
    sed 's/^/    /' "$tmp/out"
    failures=$((failures + 1))
  fi
}
source "$(dirname "$0")/expect.sh"
key_of() { "$@" target | sed -n 's/^target key *//p'; }

# The key does not change with the CPUs this process may use.
key=$(key_of "$tunec")
check "taskset -c 0 tunec target prints the key of tunec target ($key)" \
  test "$(key_of taskset -c 0 "$tunec")" = "$key"
"$tunec" target --json >"$tmp/here.json"
check "the JSON key is the printed key" grep -q "\"key\": \"$key\"" "$tmp/here.json"

# Records tuned without taskset are applied under taskset (kernels are built for the machine's
# cores either way).
check "tune the example" "$tunec" tune "$ex/model.onnx" --db "$tmp/t.db" --trials 8 --quiet
check "compile under taskset" taskset -c 0 "$tunec" compile "$ex/model.onnx" --db "$tmp/t.db" \
  -o "$tmp/taskset.so"
cp "$tmp/out" "$tmp/report"
check "under taskset every kernel is tuned" grep -q " 0 with the analytical default" "$tmp/report"

# This machine's own target file builds what a plain compile builds, and it runs here.
expect 0 "wrote" -- compile "$ex/model.onnx" --target "$tmp/here.json" -o "$tmp/here.so"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  check "run the --target build" "$tunec" run "$tmp/here.so" --input x="$ex/x.npy" --output "$tmp/o"
  check "its output matches PyTorch" /usr/bin/python3 "$src/scripts/compare_outputs.py" \
    "$ex/expected_y.npy" "$tmp/o/y.npy" --max-rel-l2 1e-5
fi

# An AVX2-only target (on an AVX-512 machine this is a cross-compile that runs here).
/usr/bin/python3 - "$tmp/here.json" "$tmp/avx2.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["isa"] = ["avx2", "fma"]
t.pop("key")
json.dump(t, open(sys.argv[2], "w"))
PY
expect 0 "wrote" -- compile "$ex/model.onnx" --target "$tmp/avx2.json" -o "$tmp/avx2.so"
check "the AVX2 build runs here" "$tunec" run "$tmp/avx2.so" --input x="$ex/x.npy" --output "$tmp/o2"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  check "the AVX2 build matches PyTorch" /usr/bin/python3 "$src/scripts/compare_outputs.py" \
    "$ex/expected_y.npy" "$tmp/o2/y.npy" --max-rel-l2 1e-5
fi

# Another machine's target: an AVX-512 Xeon. Compiling for it works anywhere; measuring refuses.
/usr/bin/python3 - "$tmp/here.json" "$tmp/xeon.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t.update(isa=["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16",
              "avx512_vnni", "amx"], model="Intel(R) Xeon(R) Platinum 8481C", cpu="sapphirerapids",
         cores=2, l1d=49152, l2=2097152, l3=110100480)
t.pop("key")
json.dump(t, open(sys.argv[2], "w"))
PY
expect 0 "wrote" -- compile "$ex/model.onnx" --target "$tmp/xeon.json" -o "$tmp/xeon.so"
if grep -qw avx512f /proc/cpuinfo; then
  check "the Xeon build runs on this AVX-512 machine" "$tunec" run "$tmp/xeon.so" \
    --input x="$ex/x.npy" --output "$tmp/o3"
else
  expect 1 "compiled for avx512" -- run "$tmp/xeon.so" --input x="$ex/x.npy" --output "$tmp/o3"
fi
expect 1 "describes another machine .*Xeon" -- tune "$ex/model.onnx" --target "$tmp/xeon.json" --trials 1
expect 1 "describes another machine" -- tune-op matmul --m 8 --n 8 --k 8 --target "$tmp/xeon.json"
expect 1 "describes another machine" -- bench-op matmul --m 8 --n 8 --k 8 --target "$tmp/xeon.json"

# A database tuned here, compiled for the Xeon: the report says the records are for another key.
expect 0 "warning: .* records in the database for another target \($key\)" -- \
  compile "$ex/model.onnx" --db "$tmp/t.db" --target "$tmp/xeon.json" -o "$tmp/xeon2.so"

# A database written before targets were parameters (tests/fixtures) still applies to every
# kernel, on any machine, when compiled for the machine it was tuned on.
cp "$src/tests/fixtures/tiny_cnn_tuned_before_target.db" "$tmp/old.db"
expect 0 " 0 with the analytical default" -- compile "$ex/model.onnx" --db "$tmp/old.db" \
  --target "$src/tests/fixtures/zen3_target.json" -o "$tmp/old.so"

# --precision bf16 for a target without avx512_bf16 compiles every kernel in fp32 and names what
# it lacks, whatever this machine has; a bf16 build for one that has it (a file written from this
# one, with the feature added) records the feature, so a CPU without it refuses to load the
# library.
expect 0 "precision bf16: every kernel in fp32: the target .AMD EPYC. \(avx2, fma\) has no bf16 instruction at avx2" -- \
  compile "$ex/model.onnx" --precision bf16 --target "$src/tests/fixtures/zen3_target.json" -o "$tmp/x.so"
expect 1 "precision 'int8' is not one of fp32, bf16" -- compile "$ex/model.onnx" --precision int8 -o "$tmp/x.so"
/usr/bin/python3 - "$tmp/here.json" "$tmp/bf16.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["isa"] = sorted(set(t["isa"]) | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"})
json.dump(t, open(sys.argv[2], "w"))
PY
expect 0 "of them in bf16" -- compile "$ex/model.onnx" --precision bf16 --target "$tmp/bf16.json" -o "$tmp/bf16.so"
if grep -q avx512_bf16 /proc/cpuinfo; then
  expect 0 "ran in" -- run "$tmp/bf16.so" --input "x=$ex/x.npy" --output "$tmp/bf16_out"
else
  expect 1 "compiled for a CPU with avx2, fma, avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16; this CPU lacks .*avx512_bf16" -- run "$tmp/bf16.so" --input "x=$ex/x.npy"
fi

# Malformed target files name the field.
echo '{"isa": ["avx2", "fma", "sse9"], "cores": 2, "l1d": 1, "l2": 1, "l3": 1, "model": "x"}' >"$tmp/bad1.json"
expect 1 "bad1.json: field 'isa': unknown feature \"sse9\"" -- compile "$ex/model.onnx" --target "$tmp/bad1.json" -o "$tmp/x.so"
echo '{"isa": ["avx2", "fma"], "cores": 0, "l1d": 1, "l2": 1, "l3": 1, "model": "x"}' >"$tmp/bad2.json"
expect 1 "field 'cores' must be a positive" -- compile "$ex/model.onnx" --target "$tmp/bad2.json" -o "$tmp/x.so"
echo '{"isa": ["avx2", "fma"], "cores": 2, "l2": 1, "l3": 1, "model": "x"}' >"$tmp/bad3.json"
expect 1 "missing field 'l1d'" -- compile "$ex/model.onnx" --target "$tmp/bad3.json" -o "$tmp/x.so"
echo '{"isa": ["sse4"' >"$tmp/bad4.json"
expect 1 "bad4.json: not JSON" -- compile "$ex/model.onnx" --target "$tmp/bad4.json" -o "$tmp/x.so"
echo '{"isa": ["avx"], "cores": 2, "l1d": 1, "l2": 1, "l3": 1, "model": "x"}' >"$tmp/bad5.json"
expect 1 "unknown feature \"avx\"" -- compile "$ex/model.onnx" --target "$tmp/bad5.json" -o "$tmp/x.so"
expect 1 "no such target file" -- compile "$ex/model.onnx" --target "$tmp/none.json" -o "$tmp/x.so"
# A cpu LLVM does not know: an error naming it, not LLVM's warning a module and a generic CPU.
echo '{"isa": ["avx2", "fma"], "cores": 2, "l1d": 32768, "l2": 1048576, "l3": 1048576, "model": "x", "cpu": "znver99"}' >"$tmp/bad6.json"
expect 1 "the target's cpu 'znver99' is not an x86-64 CPU LLVM 16 knows" -- compile "$ex/model.onnx" --target "$tmp/bad6.json" -o "$tmp/x.so"
expect 1 "not a regular file" -- compile "$ex/model.onnx" --target "$tmp" -o "$tmp/x.so"

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
