#!/usr/bin/env bash
# Builds one of tunec's libFuzzer targets with clang (+ASan/UBSan) and runs it for a bounded
# time on a seed corpus. A finding (crash, leak, sanitizer report, timeout) fails the run and
# leaves its input in BUILD_DIR/TARGET/ (libFuzzer's crash-*/leak-*/timeout-* files): turn it
# into a regression test.
# usage: scripts/fuzz.sh TARGET [SECONDS|runs=N] [BUILD_DIR]
#   runs=N: N inputs from a fixed seed (deterministic for a given build: what ctest runs)
#   TARGET: records (db import of JSONL lines), onnx (the ONNX importer), tensor (.npy and .pb
#           files), plan (model.so's plan blob), flags (count, number and duration flag values),
#           database (tuning databases edited behind tunec's back: schema, pragmas, rows, bytes)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: scripts/fuzz.sh records|onnx|tensor|plan|flags|database [SECONDS] [BUILD_DIR]}"
seconds="${2:-60}" out="${3:-build/fuzz}/$target"
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$cxx" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-14
  cxx=clang++-14
fi
mkdir -p "$out/corpus"
support="src/support/dtype.cpp src/support/error.cpp src/support/target.cpp src/support/atomic_file.cpp src/support/checksum.cpp"
ir="src/ir/shape.cpp src/ir/tensor.cpp src/ir/op_registry.cpp src/ir/graph.cpp src/ir/verifier.cpp src/ir/printer.cpp src/ir/resize.cpp"
onnx_flags="-DONNX_ML=1 -DONNX_NAMESPACE=onnx"
case "$target" in
  records)
    sources="tests/fuzz/import_fuzzer.cpp tuning_db/sqlite.cpp tuning_db/keys.cpp tuning_db/database.cpp $support"
    libs="-lsqlite3" flags=""
    cat >"$out/corpus/valid.jsonl" <<'JSONL'
{"config":{"mr":8,"nr":32},"created_at":"2026-11-30T00:00:00Z","format":"tunec-record","host":"h","result":{"error":"","gflops":100.0,"median_us":10.0,"min_us":9.0,"repeats":5,"status":"ok"},"target":{"cores":2,"isa":["avx2","fma"],"l1d":49152,"l2":1048576,"l3":33554432,"model":"cpu"},"template_version":1,"tunec_version":"0.1.0","version":1,"workload":{"k":64,"m":64,"n":64,"template":"matmul"}}
JSONL
    printf '{"format":"tunec-record","version":1}\n[1,2]\n{"a":\n' >"$out/corpus/broken.jsonl" ;;
  onnx)
    sources="tests/fuzz/onnx_import_fuzzer.cpp src/frontend/onnx_importer.cpp src/frontend/onnx_ops.cpp src/frontend/onnx_tensor.cpp $(ls src/reference/*.cpp | tr '\n' ' ') $ir $support"
    libs="-lonnx -lonnx_proto -lprotobuf" flags="$onnx_flags"
    cp examples/tiny_cnn/model.onnx "$out/corpus/tiny_cnn.onnx"
    cp tests/fuzz/regressions/onnx/*.onnx "$out/corpus/"
    cp tests/fixtures/matmul_nbits/model.onnx "$out/corpus/matmul_nbits.onnx"
    cp tests/fixtures/qdq_int4/model.onnx "$out/corpus/qdq_int4.onnx"
    # The ONNX node tests' models: one per op family.
    for m in /usr/share/libonnx-testdata/data/node/test_{conv_with_strides_padding,qlinearconv,qlinearmatmul_2D,quantizelinear_axis,dequantizelinear_axis,matmulinteger,convinteger_with_padding,gemm_default_no_bias,maxpool_2d_pads,reshape_reordered_all_dims,slice,softmax_axis_1,layer_normalization_2d_axis0_expanded,dropout_default_mask,batchnorm_epsilon,concat_1d_axis_0,gather_0,transpose_default,resize_upsample_scales_nearest,pad}/model.onnx; do
      [ -f "$m" ] && cp "$m" "$out/corpus/$(basename "$(dirname "$m")").onnx"
    done ;;
  tensor)
    sources="tests/fuzz/tensor_fuzzer.cpp src/frontend/tensor_io.cpp src/frontend/onnx_tensor.cpp $ir $support"
    libs="-lonnx_proto -lprotobuf" flags="$onnx_flags"
    cp examples/tiny_cnn/x.npy examples/tiny_cnn/expected_y.npy "$out/corpus/"
    for f in /usr/share/libonnx-testdata/data/node/test_{conv_with_strides_padding,cast_FLOAT_to_INT64,gather_0}/test_data_set_0/input_0.pb; do
      [ -f "$f" ] && cp "$f" "$out/corpus/$(basename "$(dirname "$(dirname "$f")")").pb"
    done ;;
  plan)
    sources="tests/fuzz/plan_fuzzer.cpp src/runtime/model_plan.cpp $support"
    libs="" flags=""
    # The seeds are plans of the format this runtime reads (ModelPlan::kFormatVersion), so that
    # the fuzzer starts past the format check.
    format=$(sed -n 's/.*kFormatVersion = \([0-9]*\);.*/\1/p' src/runtime/model_plan.h)
    /usr/bin/python3 - "$out/corpus" "$format" <<'PY'
import json, struct, sys
def blob(plan, constants=b""):
    text = json.dumps(plan, separators=(",", ":")).encode()
    head = 16 + len(text)
    pad = (head + 63) // 64 * 64 - head
    return b"TUNECMD1" + struct.pack("<Q", len(text)) + text + b"\0" * pad + constants
io = lambda n: {"name": n, "dtype": "f32", "shape": [1, 4], "bytes": 16}
step = {"kind": 2, "label": "softmax", "kernel": -1, "tensors": [2, 0], "ints": [1, 4, 1, 0], "floats": []}
plan = {"format": int(sys.argv[2]), "requires": ["avx2", "fma"], "threads": 1, "arena_bytes": 64, "kernel_count": 0,
        "constant_bytes": 16, "tensors": [[2, 0], [1, 0], [3, 0]], "steps": [step],
        "inputs": [io("x")], "outputs": [io("y")]}
open(sys.argv[1] + "/softmax.bin", "wb").write(blob(plan, b"\0" * 16))
plan["steps"] = []
open(sys.argv[1] + "/empty.bin", "wb").write(blob(plan, b"\0" * 16))
PY
    ;;
  flags)
    sources="tests/fuzz/flag_values_fuzzer.cpp src/cli/flag_values.cpp $support"
    libs="" flags=""
    printf '%s\n' 4294967297 2147483648 nan inf -1 1e3 0x10 " 5" 90s 30m 2h 0.5 >"$out/corpus/seeds.txt"
    for v in 4294967297 nan 1e308 90s 2h -0 0x1p3; do printf '%s' "$v" >"$out/corpus/$v"; done ;;
  database)
    sources="tests/fuzz/database_fuzzer.cpp tuning_db/sqlite.cpp tuning_db/keys.cpp tuning_db/database.cpp $support"
    libs="-lsqlite3" flags=""
    # Scripts of edits (database_fuzzer.cpp): a trigger, a view, a negative version, a changed
    # config, a byte written into the header, and an empty script.
    /usr/bin/python3 - "$out/corpus" <<'PY'
import struct, sys
def edit(choice, number=0, text=b""):
    return bytes([choice]) + struct.pack("<i", number) + bytes([len(text)]) + text
seeds = {
    "trigger": edit(0, 1), "view": edit(3, 2), "version": edit(10, -1), "appid": edit(11, 42),
    "config": edit(14, 0, b"{not json"), "wal": edit(12) + edit(22, 1, b"{}"),
    "header": edit(0xff, 18, b""), "empty": b"",
}
for name, data in seeds.items():
    open(f"{sys.argv[1]}/{name}", "wb").write(data)
PY
    cp tests/fuzz/regressions/database/* "$out/corpus/" ;;
  *) echo "fuzz.sh: unknown target '$target' (records, onnx, tensor, plan, flags, database)" >&2; exit 2 ;;
esac
echo "fuzz: building $target"
# shellcheck disable=SC2086
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I src -I . $flags $sources $libs -o "$out/fuzzer"
case "$seconds" in
  runs=*) bound=(-runs="${seconds#runs=}" -seed=1); echo "fuzz: running $target for ${seconds#runs=} inputs" ;;
  *) bound=(-max_total_time="$seconds"); echo "fuzz: running $target for $seconds s" ;;
esac
cd "$out"
./fuzzer "${bound[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  corpus 2>&1 | tail -15
