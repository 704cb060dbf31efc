#!/usr/bin/env bash
# Negative CLI tests: every user error exits non-zero with a message naming the problem.
set -uo pipefail
tunec="$1" src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$src/examples/tiny_cnn/model.onnx"
# Compiles must not pick up a ./tuning.db of the working directory.
export TUNEC_DB="$tmp/default.db"

source "$(dirname "$0")/expect.sh"

for cmd in run inspect ops bench-op target compile bench tune tune-op; do expect 0 "^usage: tunec $cmd" -- "$cmd" --help; done
expect 1 "tunec bench-op: --m is required" -- bench-op matmul --n 4 --k 4
expect 1 "--b-per-batch needs --runtime-b" -- bench-op matmul --m 8 --n 8 --k 8 --b-per-batch
expect 1 "cold_weights needs a constant B" -- bench-op matmul --m 8 --n 8 --k 8 --runtime-b --cold-weights
expect 0 "median .* GFLOP/s" -- bench-op matmul --m 8 --n 64 --k 64 --cold-weights --seconds 0.05
expect 1 "a leading dimension is shorter than its row \(lda=4" -- bench-op matmul --m 8 --n 8 --k 8 --lda 4
expect 1 "conv2d config: ic_block=5 must divide ic=8" -- bench-op conv2d --ic 8 --h 4 --w 4 --oc 16 --kh 1 --kw 1 --config '{"isa":"avx2","oc_block":16,"ow_block":4,"ic_block":5,"oh_block":1,"rows_per_tile":1,"loop_order":"oc_oh","parallel":"none"}'
expect 1 "tunec bench-op: unknown op .gemm." -- bench-op gemm --m 1
expect 1 "cannot change the types of --dtype u8s8" -- bench-op matmul --m 8 --n 16 --k 64 --dtype u8s8 --dst bf16
# The int8 GEMM runs on every machine: AMX, AVX512-VNNI, or AVX2's vpmaddubsw (7-bit weights).
expect 0 "median .* GOP/s, .* of the measured vpmaddubsw peak" -- bench-op matmul --m 20 --n 48 --k 100 --dtype u8s8 --isa avx2 --seconds 0.05
expect 0 "best [0-9.]+ GOP/s \([0-9]+% of peak\)" -- tune-op matmul --m 20 --n 48 --k 100 --dtype u8s8 --trials 4 --min-seconds 0.01 --db "$tmp/int8avx2.db"
expect 1 "the AVX2 int8 kernel reads A's k-quads from its rows in place, so k=50" -- bench-op matmul --m 8 --n 16 --k 50 --dtype u8s8 --isa avx2 --config '{"isa":"avx2","kc":48,"loop_order":"nkm","mc":8,"mr":4,"nc":16,"nr":16,"pack_a":false,"parallel":"none"}'
# The int8 convolution too (AMX where its channels fill tile rows: 64 of them).
expect 0 "median .* GOP/s, .* of the measured vpmaddubsw peak" -- bench-op conv2d --n 1 --ic 8 -h 6 -w 6 --oc 16 --kh 3 --kw 3 --pad 1 --dtype u8s8 --isa avx2 --seconds 0.05
expect 1 "--dtype must be f32, bf16 or u8s8, not 'u4'" -- bench-op conv2d --n 1 --ic 8 -h 6 -w 6 --oc 16 --kh 3 --kw 3 --dtype u4
if "$tunec" target | grep -q "isa features.*avx512_vnni"; then
  expect 0 "median .* GOP/s, .* of the measured vpdpbusd peak" -- bench-op matmul --m 20 --n 48 --k 100 --dtype u8s8 --isa avx512 --seconds 0.05
fi
if "$tunec" target | grep -q "isa features.*amx"; then
  expect 0 "median .* GOP/s, .* of the measured tdpbusd peak" -- bench-op conv2d --n 1 --ic 64 -h 14 -w 14 --oc 64 --kh 3 --kw 3 --pad 1 --dtype u8s8 --seconds 0.05
  expect 0 "median .* GFLOP/s, .* of the measured tdpbf16ps peak" -- bench-op conv2d --n 1 --ic 64 -h 14 -w 14 --oc 64 --kh 3 --kw 3 --pad 1 --dtype bf16 --seconds 0.05
  expect 0 "median .* GOP/s, .* of the measured tdpbusd peak" -- bench-op matmul --m 20 --n 48 --k 100 --dtype u8s8 --seconds 0.05
  expect 0 "best [0-9.]+ GOP/s \([0-9]+% of peak\)" -- tune-op matmul --m 20 --n 48 --k 100 --dtype u8s8 --trials 4 --min-seconds 0.01 --db "$tmp/int8.db"
  expect 0 "^4 trials \(0 errors\)" -- tune-op matmul --m 20 --n 48 --k 100 --dtype u8s8 --trials 4 --min-seconds 0.01 --db "$tmp/int8b.db"
fi
expect 0 "median .* GFLOP/s" -- bench-op conv2d --n 1 --ic 8 -h 4 -w 4 --oc 8 --kh 1 --kw 1 --seconds 0.05
expect 0 "^usage: tunec bench-op" -- bench-op -h
expect 0 "^usage: tunec <command>" -- --help
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 1 "unknown flag '--bogus'" -- run "$model" --bogus
expect 1 "expected tunec run MODEL.onnx" -- run
expect 1 "cannot open file" -- run "$tmp/missing.onnx" --input x=foo.npy
echo "this is not a model" >"$tmp/text.onnx"
expect 1 "not an ONNX model" -- inspect "$tmp/text.onnx"
head -c 3000 "$model" >"$tmp/truncated.onnx"
expect 1 "not an ONNX model" -- inspect "$tmp/truncated.onnx"
expect 1 "missing --input for model input 'x' \(f32\[1x3x32x32\]\)" -- run "$model"
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/wrong.npy', np.ones((1,3,16,16), np.float32))"
expect 1 "input 'x' from .*wrong.npy is f32\[1x3x16x16\], but the model expects f32\[1x3x32x32\]" -- run "$model" --input x="$tmp/wrong.npy"
expect 1 "--input names 'y', which is not a model input" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --input y="$tmp/wrong.npy"
# Crafted tensor files: each a user error (exit 1) naming the file, never an abort or a hang.
npy() { # npy FILE SHAPE-TEXT: a .npy v1 header with that shape and 16 data bytes
  local header="{'descr': '<f4', 'fortran_order': False, 'shape': ($2), }"
  while [ $(((${#header} + 11) % 64)) -ne 0 ]; do header="$header "; done
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(((${#header} + 1) % 256)))\\x$(printf %02x $(((${#header} + 1) / 256)))"
    printf '%s\n' "$header"; printf '0123456789abcdef'; } >"$1"
}
npy "$tmp/text.npy" "1, three"
expect 1 "text.npy: not a valid .npy file: shape dimension 'three' is not a whole number" -- run "$model" --input x="$tmp/text.npy"
npy "$tmp/neg.npy" "1, -4"
expect 1 "neg.npy: not a valid .npy file: shape dimension '-4' is not a whole number" -- run "$model" --input x="$tmp/neg.npy"
npy "$tmp/huge.npy" "1, 99999999999999999999"
expect 1 "huge.npy: not a valid .npy file: shape dimension '99999999999999999999'" -- run "$model" --input x="$tmp/huge.npy"
npy "$tmp/big.npy" "4000000000, 4000000000, 4000000000"
expect 1 "big.npy: not a valid .npy file: shape .* is too large for any file" -- run "$model" --input x="$tmp/big.npy"
npy "$tmp/ok4.npy" "4,"
expect 1 "ok4.npy is f32\[4\], but the model expects" -- run "$model" --input x="$tmp/ok4.npy"
printf '\x08\x80\x80\x80\x80\x80\x01\x10\x01' >"$tmp/huge.pb" # dims [2^35], FLOAT, no data
expect 1 "huge.pb: tensor '' of shape .* holds 0 values, expected 34359738368" -- run "$model" --input x="$tmp/huge.pb"
expect 1 "/dev/zero: not a regular file" -- run "$model" --input x=/dev/zero
mkfifo "$tmp/fifo"
expect 1 "fifo: not a regular file" -- run "$model" --input x="$tmp/fifo"
# A FIFO, directory or device as the model is refused by name (opening a FIFO would block).
expect 1 "fifo: not a regular file \(a directory, FIFO or device\): give the .onnx model file" -- compile "$tmp/fifo" -o "$tmp/never.so"
mkfifo "$tmp/fifo.so"
expect 1 "fifo.so: cannot load: not a regular file" -- run "$tmp/fifo.so" --input x="$src/examples/tiny_cnn/x.npy"
expect 1 "not a regular file \(a directory, FIFO or device\)" -- inspect "$tmp"
expect 1 "--input 'x' is given twice" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --input x="$tmp/ok4.npy"
cp "$model" "$tmp/self.onnx"
expect 1 "-o .*self.onnx is the input .*self.onnx" -- compile "$tmp/self.onnx" -o "$tmp/self.onnx"
cmp -s "$model" "$tmp/self.onnx" || { echo "FAIL: compile -o over its input changed it"; failures=$((failures + 1)); }
# SIGTERM and SIGHUP stop a tuning job as Ctrl-C does: the batch in flight is committed, exit 130.
for sig in TERM HUP; do
  "$tunec" tune "$model" --db "$tmp/sig$sig.db" --trials 5000 --quiet >"$tmp/sig.out" 2>&1 &
  pid=$!
  # Signal once the job is measuring (its first batch is in the database), not while it starts.
  for _ in $(seq 120); do
    "$tunec" db stats --db "$tmp/sig$sig.db" 2>/dev/null | grep -q " [1-9][0-9]* records" && break
    sleep 0.5
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  checks=$((checks + 1))
  records=$("$tunec" db stats --db "$tmp/sig$sig.db" 2>/dev/null | sed -n 's/.* \([0-9][0-9]*\) records.*/\1/p' | head -1)
  if [ "$rc" -ne 130 ] || ! grep -q "^interrupted: " "$tmp/sig.out" || [ "${records:-0}" -lt 1 ]; then
    echo "FAIL: SIG$sig during tune -> exit $rc (want 130), ${records:-0} records, output:"
    sed 's/^/    /' "$tmp/sig.out"
    failures=$((failures + 1))
  fi
done
# The constants' blob lies in a large-data section (.lrodata), which the linker places after
# everything the code reaches by 32-bit offsets: a model.so of more than 2 GiB of constants links
# (a 2.4 GB folded ConstantOfShape, by hand: docs/benchmarks.md) instead of failing with
# "relocation truncated to fit".
"$tunec" compile "$model" -o "$tmp/blob.so" >/dev/null 2>&1
checks=$((checks + 1))
if ! readelf -SW "$tmp/blob.so" | grep -q " \.lrodata "; then
  echo "FAIL: the model blob is not in .lrodata"
  readelf -SW "$tmp/blob.so" | head -40
  failures=$((failures + 1))
fi
# A full disk: compile, db export and run --output fail with a message and leave no partial or
# temporary file (a small tmpfs, where this runs as root; skipped elsewhere, and said).
mkdir -p "$tmp/full"
if mount -t tmpfs -o size=160k tmpfs "$tmp/full" 2>/dev/null; then
  trap 'umount "$tmp/full" 2>/dev/null; rm -rf "$tmp"' EXIT
  "$tunec" compile "$model" -o "$tmp/m_full.so" >/dev/null 2>&1
  dd if=/dev/zero of="$tmp/full/fill" bs=1k 2>/dev/null # until the disk is full
  expect 1 "full/m.so: cannot write the object file: No space left on device" -- compile "$model" -o "$tmp/full/m.so"
  "$tunec" tune "$model" --db "$tmp/full_src.db" --trials 4 --quiet >/dev/null 2>&1
  expect 1 "e.jsonl: cannot write: write failed \(disk full\?\)" -- db export --db "$tmp/full_src.db" --out "$tmp/full/e.jsonl"
  expect 1 "y.npy: cannot write: write failed" -- run "$tmp/m_full.so" --input x="$src/examples/tiny_cnn/x.npy" --output "$tmp/full/out"
  checks=$((checks + 1))
  left=$(cd "$tmp/full" && find . -type f ! -name fill | sort | tr '\n' ' ')
  [ -z "$left" ] || { echo "FAIL: a full disk left files behind: $left"; failures=$((failures + 1)); }
  umount "$tmp/full"
else
  echo "skipped: the full-disk checks need to mount a tmpfs (run as root)"
fi
# Outputs are written under the model's own output names, also when a pass replaced the value
# that produces them (the expanded LayerNormalization node test: Mean and InvStdDev).
ln=/usr/share/libonnx-testdata/data/node/test_layer_normalization_2d_axis0_expanded
if [ -d "$ln" ]; then
  for form in onnx so; do
    m="$ln/model.onnx"
    [ "$form" = so ] && { "$tunec" compile "$m" -o "$tmp/ln.so" >/dev/null; m="$tmp/ln.so"; }
    expect 0 "-> .*/ln_$form/InvStdDev.npy" -- run "$m" --input X="$ln/test_data_set_0/input_0.pb" \
      --input W="$ln/test_data_set_0/input_1.pb" --input B="$ln/test_data_set_0/input_2.pb" --output "$tmp/ln_$form"
  done
fi
# Outputs a converter's expansion computes (DynamicQuantizeLinear's scale and zero point) are
# written and checked under their graph names.
node=/usr/share/libonnx-testdata/data/node
for t in test_dynamicquantizelinear test_dynamicquantizelinear_max_adjusted \
  test_dynamicquantizelinear_min_adjusted; do
  [ -d "$node/$t" ] || continue
  d="$node/$t/test_data_set_0"
  expect 0 "check y_zero_point: matches" -- run "$node/$t/model.onnx" --input x="$d/input_0.pb" \
    --expect y="$d/output_0.pb" --expect y_scale="$d/output_1.pb" --expect y_zero_point="$d/output_2.pb"
done
# A tuning database on a read-only mount is read by compile (read-only open, immutable), where
# this runs as root and can mount; skipped elsewhere, and said.
mkdir -p "$tmp/ro"
if mount -t tmpfs -o size=4m tmpfs "$tmp/ro" 2>/dev/null; then
  "$tunec" tune "$model" --db "$tmp/ro/t.db" --trials 4 --quiet >/dev/null 2>&1
  if mount -o remount,ro "$tmp/ro" 2>/dev/null; then
    expect 0 " 0 with the analytical default" -- compile "$model" --db "$tmp/ro/t.db" -o "$tmp/ro_db.so"
    expect 0 "4 workloads" -- db stats --db "$tmp/ro/t.db"
    expect 1 "t.db: .*(read-only|readonly)" -- db import --db "$tmp/ro/t.db" /dev/null
  fi
  umount "$tmp/ro"
else
  echo "skipped: the read-only database checks need to mount a tmpfs (run as root)"
fi
echo garbage >"$tmp/garbage.npy"
expect 1 "neither a .npy file nor a serialized ONNX TensorProto" -- run "$model" --input x="$tmp/garbage.npy"
expect 1 "--input-shape 'x=1xAx3' is not of the form" -- inspect "$model" --input-shape x=1xAx3
expect 1 "--input-shape names 'z', which is not a model input \(inputs: x\)" -- inspect "$model" --input-shape z=1x3x32x32
# bench times random inputs, or the tensor files --input gives, checked against the input.
expect 0 "5 runs on 1 thread: median" -- bench "$model" --runs 5 --threads 1 --input x="$src/examples/tiny_cnn/x.npy"
expect 1 "input 'x' from .*expected_y.npy is f32\[1x10\], but the model expects f32\[1x3x32x32\]" -- bench "$model" --runs 5 --input x="$src/examples/tiny_cnn/expected_y.npy"
expect 1 "--input names 'z', which is not a model input" -- bench "$model" --runs 5 --input z="$src/examples/tiny_cnn/x.npy"
expect 1 "--input 'x' is not of the form NAME=FILE" -- bench "$model" --runs 5 --input x
# Dynamic dimensions: bounded with --dim (symbolic through shape inference), or fixed.
dyn="$src/tests/fixtures/mlp_dynamic.onnx"
expect 1 "input 'x' has a dynamic dimension 'batch' \(dim 0\) without bounds: bound it with --dim batch=MIN..MAX \(a symbolic compile\), or fix it with --input-shape x=1x1x16" -- inspect "$dyn"
expect 0 "%y: f32\[batch x sequence x 32\] = Softmax" -- inspect "$dyn" --dim batch=1..8 --dim sequence=1..128
expect 0 "%y: f32\[2 x sequence x 32\]" -- inspect "$dyn" --dim batch=2..2 --dim sequence=1..128
expect 0 "%y: f32\[batch x tokens x 32\]" -- inspect "$dyn" --dim batch=1..8 --dim x:1=tokens --dim tokens=1..64
expect 1 "--dim seq=1..64 names no dynamic dimension of the model \(its dynamic dimensions: batch, sequence\)" -- inspect "$dyn" --dim batch=1..8 --dim sequence=1..128 --dim seq=1..64
expect 1 "--dim 'sequence=1-128' is not of the form NAME=MIN..MAX" -- inspect "$dyn" --dim sequence=1-128
expect 1 "--dim 'sequence=9..8': the bounds must satisfy 0 <= MIN <= MAX" -- inspect "$dyn" --dim sequence=9..8
expect 1 "--dim gives the bounds of 'batch' twice" -- inspect "$dyn" --dim batch=1..8 --dim batch=1..4
expect 1 "--dim 'x:one=tokens' is not of the form INPUT:AXIS=NAME" -- inspect "$dyn" --dim x:one=tokens
# One model.so for every shape within the bounds: each run at its input file's shape.
# A variant per size bucket of M = batch*sequence (1..16, 17..32, ..., up to the bound 1024).
expect 0 "MatMul '/l/MatMul' 1x\(batch\*sequence in 1..16\)x32x16 \+ bias\+relu\+layernorm" -- compile "$dyn" --dim batch=1..8 --dim sequence=1..128 -o "$tmp/dynamic.so"
expect 0 "MatMul '/l/MatMul' 1x\(batch\*sequence in [0-9]+..1024\)x32x16" -- compile "$dyn" --dim batch=1..8 --dim sequence=1..128 -o "$tmp/dynamic.so"
# Tuning: every bucket is a task; a static compile's record serves the bucket of its size.
expect 0 "matmul 16x32x16 t1" -- tune "$dyn" --dim batch=1..8 --dim sequence=1..128 --threads 1 --list-tasks
expect 0 "matmul 1024x32x16 t1" -- tune "$dyn" --dim batch=1..8 --dim sequence=1..128 --threads 1 --list-tasks
expect 0 "matmul 16x32x16 t1 +4" -- tune "$dyn" --dim batch=2..2 --dim sequence=8..8 --threads 1 --trials 4 --db "$tmp/buckets.db"
expect 0 "tuned +MatMul '/l/MatMul' 1x\(batch\*sequence in 1..16\)" -- compile "$dyn" --dim batch=1..8 --dim sequence=1..128 --threads 1 --db "$tmp/buckets.db" -o "$tmp/tuned.so"
/usr/bin/python3 - "$tmp" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
for b, s in [(1, 1), (3, 50), (8, 128), (9, 4), (2, 129)]:
    np.save(f"{sys.argv[1]}/x_{b}x{s}.npy", rng.standard_normal((b, s, 16)).astype(np.float32))
np.save(f"{sys.argv[1]}/x_rank2.npy", np.zeros((3, 16), np.float32))
PY
for bs in 1x1 3x50 8x128; do
  expect 0 "output y: f32\[${bs}x32\]" -- run "$tmp/dynamic.so" --input x="$tmp/x_$bs.npy" --output "$tmp/out_$bs"
  # The same values as the reference executor on the model fixed at that shape.
  expect 0 "check y: matches" -- run "$dyn" --reference --input-shape x=${bs}x16 --input x="$tmp/x_$bs.npy" --expect y="$tmp/out_$bs/y.npy"
done
expect 0 "output y: f32\[3x50x32\]" -- run "$dyn" --dim batch=1..8 --dim sequence=1..128 --input x="$tmp/x_3x50.npy"
expect 1 "dimension 0 of input 'x' is 9, outside the bounds of 'batch' \(1..8\) it was compiled for" -- run "$tmp/dynamic.so" --input x="$tmp/x_9x4.npy"
expect 1 "dimension 1 of input 'x' is 129, outside the bounds of 'sequence' \(1..128\)" -- run "$tmp/dynamic.so" --input x="$tmp/x_2x129.npy"
expect 1 "input 'x' from .*x_rank2.npy is f32\[3x16\], but the model expects f32\[8x128x16\]" -- run "$tmp/dynamic.so" --input x="$tmp/x_rank2.npy"
expect 0 "runs on 1 thread: median" -- bench "$tmp/dynamic.so" --runs 3 --threads 1 --input x="$tmp/x_3x50.npy"
# A BERT exported with dynamic batch and sequence (masks, position ids, token types; three inputs
# that bind two symbols): compiled once, PyTorch's output at two shapes.
bert="$src/tests/fixtures/bert_dynamic"
expect 0 "wrote .*bert.so" -- compile "$bert/model.onnx" --dim batch=1..4 --dim sequence=1..32 --threads 1 -o "$tmp/bert.so"
for tag in 1x5 3x29; do
  expect 0 "check last_hidden_state: matches" -- run "$tmp/bert.so" --threads 1 --input input_ids="$bert/ids_$tag.npy" --input attention_mask="$bert/mask_$tag.npy" --input token_type_ids="$bert/types_$tag.npy" --expect last_hidden_state="$bert/expected_$tag.npy"
done
# The same BERT in the form ONNX Runtime's transformer optimizer writes (com.microsoft
# EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu): the same outputs.
opt="$src/tests/fixtures/bert_ort_optimized"
expect 0 "wrote .*bert_opt.so" -- compile "$opt/model.onnx" --dim batch=1..4 --dim sequence=1..32 --threads 1 -o "$tmp/bert_opt.so"
for tag in 1x5 3x29; do
  expect 0 "check last_hidden_state: matches" -- run "$tmp/bert_opt.so" --threads 1 --input input_ids="$bert/ids_$tag.npy" --input attention_mask="$bert/mask_$tag.npy" --input token_type_ids="$bert/types_$tag.npy" --expect last_hidden_state="$bert/expected_$tag.npy"
done
expect 1 "dimension 0 of input 'attention_mask' is 3, but 'batch' is 1 in input 'input_ids': the inputs disagree on it" -- run "$tmp/bert.so" --input input_ids="$bert/ids_1x5.npy" --input attention_mask="$bert/mask_3x29.npy" --input token_type_ids="$bert/types_1x5.npy"
# A CNN exported with a dynamic batch axis: compiled once for one image and run once per image
# of each run (at the bounds and between them), PyTorch's output; a batch past the bound is an
# error before anything runs; bench and profile time a given batch; a JIT run works the same.
cnn="$src/tests/fixtures/cnn_dynamic_batch"
expect 0 "dynamic batch 'batch_size' \(1..8\): the plan of one image runs once per image of the run; the arena is one image's" \
  -- compile "$cnn/model.onnx" --dim batch_size=1..8 -o "$tmp/cnn.so"
for b in 1 3 8; do
  expect 0 "check probs: matches" -- run "$tmp/cnn.so" --input image="$cnn/x_$b.npy" --expect probs="$cnn/y_$b.npy"
done
expect 0 "check probs: matches" -- run "$cnn/model.onnx" --dim batch_size=1..8 --input image="$cnn/x_3.npy" --expect probs="$cnn/y_3.npy"
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/x_9.npy', np.zeros((9, 3, 20, 20), np.float32))"
expect 1 "dimension 0 of input 'image' is 9, outside the bounds of 'batch_size' \(1..8\)" -- run "$tmp/cnn.so" --input image="$tmp/x_9.npy"
expect 0 "runs on 1 thread: median" -- bench "$tmp/cnn.so" --runs 3 --threads 1 --input-shape image=5x3x20x20
expect 0 "step profile .* steps" -- bench "$tmp/cnn.so" --runs 2 --profile --input-shape image=2x3x20x20
expect 1 "--input-shape image=5x3x20: input 'image' has rank 4" -- bench "$tmp/cnn.so" --runs 1 --input-shape image=5x3x20
expect 1 "dimension 0 of input 'image' is 9, outside the bounds" -- bench "$tmp/cnn.so" --runs 1 --input-shape image=9x3x20x20
expect 0 "wrote .*dyn.so" -- compile "$dyn" --dim batch=2..2 --dim sequence=5..5 -o "$tmp/dyn.so"
expect 1 "--format must be npy or pb" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --format csv
expect 0 "= Conv\(%x.*\{kernel=\[3,3\] strides=\[1,1\]" -- inspect "$model"
expect 0 "Conv +3" -- inspect "$model" --summary
expect 0 "fusion: 11 nodes -> 6 kernels \(4 anchored\); the steps compile builds" -- inspect "$model" --summary --fusion
expect 0 "^  11 graph nodes -> 6 steps \(4 generated kernels, 2 loop kernels; 0 reorders" -- inspect "$model" --summary --fusion
expect 0 "kernel 2 \(conv2d anchor\): Conv Add Relu" -- inspect "$model" --fusion
expect 0 "step 2 generated Conv '/conv3/Conv' .* \+ bias\+add\+relu" -- inspect "$model" --fusion
expect 0 "arena: 10 tensors, .* \(peak / bound 1.000\)" -- inspect "$model" --summary --memory
expect 0 "// after fold-constants \(unchanged\)" -- inspect "$model" --summary --print-after-all
expect 0 "ran 11 nodes" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --reference --optimize

# Compiling, running and benchmarking compiled models.
expect 1 "say where to write the library with -o FILE" -- compile "$model"
pool1d=/usr/share/libonnx-testdata/data/node/test_averagepool_1d_default/model.onnx
expect 1 "node 'AveragePool_0' \\(AveragePool\\): only 2-d pooling" -- compile "$pool1d" -o "$tmp/h.so"
test ! -e "$tmp/h.so" || { echo "FAIL: a failed compile left $tmp/h.so"; failures=$((failures + 1)); }
expect 0 "4 heavy kernels: 0 tuned, 4 with the analytical default" -- compile "$model" -o "$tmp/m.so"
expect 0 "ran in .* ms on 1 thread \(model.so\)" -- run "$tmp/m.so" --input x="$src/examples/tiny_cnn/x.npy" --threads 1
expect 1 "missing --input for model input 'x' \(f32\[1x3x32x32\]\)" -- run "$tmp/m.so"
echo "not a library" >"$tmp/fake.so"
expect 1 "fake.so: not a tunec model.so, or a truncated one" -- run "$tmp/fake.so" --input x="$src/examples/tiny_cnn/x.npy"
cp /lib/x86_64-linux-gnu/libm.so.6 "$tmp/libm.so"
expect 1 "libm.so: not a tunec model.so" -- bench "$tmp/libm.so"
expect 0 "median .* ms, p90 .* ms, min .* ms" -- bench "$tmp/m.so" --runs 5 --warmup 1
expect 0 "step profile .* 6 steps" -- bench "$tmp/m.so" --runs 3 --profile
expect 0 "grouped by computation \([0-9]+ groups\)" -- bench "$tmp/m.so" --runs 3 --profile
expect 1 "--runs must be at least 1" -- bench "$tmp/m.so" --runs 0
# A bare file name is the file in the working directory (dlopen would search the library path).
pushd "$tmp" >/dev/null
expect 0 "median .* ms" -- bench m.so --runs 2 --warmup 0
popd >/dev/null
expect 1 "--threads must be a whole number from 1 to 1024, not 'two'" -- bench "$tmp/m.so" --threads two

# Tuning.
expect 1 "--time-budget must be a duration such as 0.5, 90s, 30m or 2h \(positive, at most 8760h\), not '5x'" -- tune "$model" --db "$tmp/t.db" --time-budget 5x
expect 1 "tunec bench-op: --m is required" -- tune-op matmul --n 8 --k 8 --db "$tmp/t.db"
# Counts and durations out of range, NaN or infinite: refused by name with the range, never
# wrapped (4294967297 trials ran 1) or recorded (NaN durations made every config an error).
expect 1 "--trials must be a whole number from 1 to 1000000000, not '4294967297'" -- tune "$model" --db "$tmp/t.db" --trials 4294967297
expect 1 "--trials must be a whole number from 1 to 1000000000, not '2147483648'" -- tune "$model" --db "$tmp/t.db" --trials 2147483648
expect 1 "--min-seconds must be a duration .*not 'nan'" -- tune "$model" --db "$tmp/t.db" --min-seconds nan
expect 1 "--time-budget must be a duration .*not 'nan'" -- tune "$model" --db "$tmp/t.db" --time-budget nan
expect 1 "--timeout must be a duration .*not 'inf'" -- tune-op matmul --m 8 --n 8 --k 8 --db "$tmp/t.db" --timeout inf
expect 1 "--seconds must be a duration .*not '-1'" -- bench-op matmul --m 8 --n 8 --k 8 --seconds -1
expect 1 "--m must be a whole number from 1 to 2147483648, not '99999999999999999999'" -- bench-op matmul --m 99999999999999999999 --n 8 --k 8
expect 1 "--random must be a whole number from 1 to 100000, not '1000000000'" -- quantize "$model" -o "$tmp/q.onnx" --random 1000000000
# NaN is a mismatch: one NaN in the expected output, or NaN outputs against expected numbers.
/usr/bin/python3 -c "import numpy as np; y = np.load('$src/examples/tiny_cnn/expected_y.npy'); y.flat[3] = np.nan; np.save('$tmp/y_nan.npy', y)"
expect 1 "check y: DIFFERS from .*y_nan.npy: relative L2 error inf .* 1 NaN where the expected is a number or the reverse" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --expect y="$tmp/y_nan.npy"
expect 0 "check y: matches" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --expect y="$src/examples/tiny_cnn/expected_y.npy"
expect 1 "--tolerance must be a number from 0 to 1000, not 'nan'" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --expect y="$src/examples/tiny_cnn/x.npy" --tolerance nan
expect 1 "--runs must be a whole number from 0 to 1000000000, not '1e3'" -- bench "$model" --runs 1e3
expect 0 "4 trials \(0 errors\)" -- tune-op matmul --m 64 --n 64 --k 64 --trials 4 --db "$tmp/t.db" --min-seconds 0.01
expect 0 "config_source.:.best in" -- bench-op matmul --m 64 --n 64 --k 64 --db "$tmp/t.db" --seconds 0.05 --json
expect 0 "tuned +Gemm|4 heavy kernels: [0-4] tuned" -- compile "$model" -o "$tmp/m2.so" --db "$tmp/t.db"
# Ctrl-C: the job stops after the running candidate, with every measured config saved.
"$tunec" tune-op matmul --m 128 --n 128 --k 128 --trials 100000 --db "$tmp/int.db" --min-seconds 0.01 --quiet >"$tmp/int.out" 2>&1 &
pid=$!
sleep 4
kill -INT $pid
wait $pid
rc=$?
checks=$((checks + 1))
if [ $rc -ne 130 ] || ! grep -q "^interrupted: [1-9][0-9]* trials" "$tmp/int.out"; then
  echo "FAIL: interrupted tune-op -> exit $rc (want 130), output:"; sed 's/^/    /' "$tmp/int.out"
  failures=$((failures + 1))
fi
saved=$(grep -o "^interrupted: [0-9]*" "$tmp/int.out" | grep -o "[0-9]*$")
expect 0 "1 workloads, ${saved:-x} records" -- db stats --db "$tmp/int.db"

# Records tuned at one thread count: a compile at another names them and the flag that uses
# them, and report --model at the compile's count says it charts nothing, at theirs charts them.
"$tunec" tune "$model" --trials 6 --threads 1 --db "$tmp/t1.db" --quiet >/dev/null 2>&1
expect 0 "4 kernels left at the default have records for this machine at another thread count \(1\) .* compile with --threads 1" -- compile "$model" -o "$tmp/t2.so" --threads 2 --db "$tmp/t1.db"
expect 0 "none of the 4 tasks of the model \(at 2 threads, fp32\) has records" -- report "$tmp/t1.db" --model "$model" --threads 2 -o "$tmp/t2.html"
expect 0 "wrote .*: 4 tasks, 6 trials" -- report "$tmp/t1.db" --model "$model" --threads 1 -o "$tmp/t1.html"

# Outputs: never a device, a directory or an input of the command (also behind a symlink), and
# no staging file left behind.
mkdir -p "$tmp/outs/dir" && cp "$model" "$tmp/outs/m.onnx" && ln -sf m.onnx "$tmp/outs/link.so"
expect 1 "/dev/null: is a device, and tunec writes only regular files" -- compile "$model" -o /dev/null
expect 1 "outs/dir: is a directory" -- compile "$model" -o "$tmp/outs/dir"
expect 1 "-o .*outs/link.so is the input .*outs/m.onnx" -- compile "$tmp/outs/m.onnx" -o "$tmp/outs/link.so"
expect 1 "-o .*outs/m.onnx is the input model" -- quantize "$tmp/outs/m.onnx" -o "$tmp/outs/m.onnx" --random 1
"$tunec" tune "$model" --trials 2 --db "$tmp/outs/t.db" --quiet >/dev/null 2>&1
expect 1 "t.db: is the same file as the input" -- report "$tmp/outs/t.db" -o "$tmp/outs/t.db"
expect 1 "t.db: is the same file as the input" -- db export --db "$tmp/outs/t.db" --out "$tmp/outs/t.db"
expect 0 "wrote .*outs/m.so" -- compile "$tmp/outs/m.onnx" -o "$tmp/outs/m.so"
checks=$((checks + 1))
if [ -c /dev/null ] && [ -z "$(ls -A "$tmp/outs" | grep -v -x -e dir -e m.onnx -e link.so -e t.db -e m.so -e 't.db-wal' -e 't.db-shm')" ]; then :; else
  echo "FAIL: /dev/null replaced or staging files left in the output folder:"; ls -la "$tmp/outs" /dev/null | sed 's/^/    /'
  failures=$((failures + 1))
fi

# Output names from the model: two that map to one file name (a/b and a_b) are both written,
# the second numbered, and a name with escape sequences reaches the terminal escaped.
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 - "$tmp/names.onnx" "$tmp/names_x.npy" <<'PY'
import sys, numpy as np, torch
class Three(torch.nn.Module):
    def forward(self, x):
        return x + 1, x * 3, x - 1
x = torch.ones(2, 3)
torch.onnx.export(Three(), (x,), sys.argv[1], input_names=["x"], opset_version=13,
                  output_names=["a/b", "a_b", "evil\x1b]0;pwned\x07\x1b[2J"])
np.save(sys.argv[2], x.numpy())
PY
  out=$("$tunec" run "$tmp/names.onnx" --input "x=$tmp/names_x.npy" --output "$tmp/names_out" 2>&1)
  checks=$((checks + 1))
  if grep -q $'\x1b' <<<"$out" || ! grep -qF 'evil\x1b]0;pwned\x07\x1b[2J' <<<"$out" ||
     [ "$(/usr/bin/python3 -c "import numpy as np; print(np.load('$tmp/names_out/a_b.npy')[0,0], np.load('$tmp/names_out/a_b_2.npy')[0,0])")" != "2.0 3.0" ] ||
     [ ! -f "$tmp/names_out/evil_]0;pwned__[2J.npy" ]; then
    echo "FAIL: output names: escapes on the terminal, or an output file lost; output:"
    echo "$out" | cat -v | sed 's/^/    /'
    ls "$tmp/names_out" | cat -v | sed 's/^/    /'
    failures=$((failures + 1))
  fi
else
  echo "skipped: output names (no python3-torch to export the model)"
fi

# An output that is one of the command's inputs (by any path: the same name, a symlink, the
# database) is refused before anything is written, and the input is left as it was.
mkdir -p "$tmp/inout"
cp "$src/examples/tiny_cnn/x.npy" "$tmp/inout/y.npy"
ln -sf y.npy "$tmp/inout/link.npy"
before=$(md5sum < "$tmp/inout/y.npy")
expect 1 "--output $tmp/inout: $tmp/inout/y.npy: is the same file as the input $tmp/inout/y.npy" \
  -- run "$model" --input "x=$tmp/inout/y.npy" --output "$tmp/inout"
expect 1 "is the same file as the input $tmp/inout/link.npy" \
  -- run "$model" --reference --input "x=$tmp/inout/link.npy" --output "$tmp/inout"
checks=$((checks + 1))
if [ "$(md5sum < "$tmp/inout/y.npy")" != "$before" ]; then
  echo "FAIL: run --output replaced its own input"; failures=$((failures + 1))
fi

# tunec generate: the decoder fixture's greedy tokens are PyTorch's; the past's bound, a model
# that is no decoder and a bad prompt are errors naming them.
dec="$src/tests/fixtures/decoder_tiny"
prompt=$(/usr/bin/python3 -c "import numpy as np; print(','.join(map(str, np.load('$dec/prompt.npy')[0])))")
want=$(/usr/bin/python3 -c "import numpy as np; print(' '.join(map(str, np.load('$dec/tokens.npy'))))")
decdims="--dim batch=1..1 --dim sequence=1..16 --dim past_sequence=0..32"
# shellcheck disable=SC2086
expect 0 "tokens: $want" -- generate "$dec/model.onnx" --prompt-ids "$prompt" --tokens 8 $decdims
# shellcheck disable=SC2086
expect 1 "token 29: the context holds 33 tokens and 1 more do not fit: the model was compiled for a past of at most 32 tokens" \
  -- generate "$dec/model.onnx" --prompt-ids "$prompt" --tokens 40 $decdims
# Its K/V caches kept in place (one buffer per cache, only a run's rows written), in a model.so
# too; a prompt longer than the sequence bound prefills in several runs, the same tokens.
# shellcheck disable=SC2086
expect 0 "K/V caches kept in place: 4 \(capacity 48 positions" -- compile "$dec/model.onnx" -o "$tmp/dec.so" $decdims
expect 0 "tokens: $want\$" -- generate "$tmp/dec.so" --prompt-ids "$prompt" --tokens 8
expect 0 "K/V caches in place" -- generate "$tmp/dec.so" --prompt-ids "$prompt" --tokens 2
expect 0 "tokens: $want\$" -- generate "$dec/model.onnx" --prompt-ids "$prompt" --tokens 8 \
  --dim batch=1..1 --dim sequence=1..2 --dim past_sequence=0..32
# --buckets: the sequence's buckets as given (each its own variant and task), the same tokens;
# edges that do not ascend, pass the bound or name no --dim symbol are errors naming the flag.
# shellcheck disable=SC2086
expect 0 "MatMul '/lm_head/MatMul' 1x\(sequence in 5..8\)x256x64" \
  -- compile "$dec/model.onnx" -o "$tmp/decb.so" $decdims --buckets sequence=4,8
expect 0 "tokens: $want\$" -- generate "$tmp/decb.so" --prompt-ids "$prompt" --tokens 8
# shellcheck disable=SC2086
expect 1 "--buckets 'sequence=8,4': the edges must ascend" \
  -- compile "$dec/model.onnx" -o "$tmp/decb.so" $decdims --buckets sequence=8,4
# shellcheck disable=SC2086
expect 1 "--buckets 'sequence=40': 40 is outside the bounds of 'sequence' \(1..16\)" \
  -- compile "$dec/model.onnx" -o "$tmp/decb.so" $decdims --buckets sequence=40
# shellcheck disable=SC2086
expect 1 "--buckets 'seq=4': 'seq' has no bounds: give them with --dim seq=MIN..MAX" \
  -- tune "$dec/model.onnx" --db "$tmp/decb.db" $decdims --buckets seq=4
# tune --histogram: each bucket's tasks weigh as the share of the runs in the bucket (12 of 14 at
# 16 or fewer tokens: 0.857; 2 in 9..16 of --buckets 8: 0.143; a bucket never seen: the floor).
printf '# served lengths\n3 10\n5\n5\n12 2\n' > "$tmp/lengths.txt"
# shellcheck disable=SC2086
expect 0 " 0.857143  matmul 8x256x64" -- tune "$dec/model.onnx" $decdims --buckets sequence=8 \
  --histogram "sequence=$tmp/lengths.txt" --list-tasks
# shellcheck disable=SC2086
expect 0 " 0.142857  matmul 16x256x64" -- tune "$dec/model.onnx" $decdims --buckets sequence=8 \
  --histogram "sequence=$tmp/lengths.txt" --list-tasks
printf '3 x\n' > "$tmp/lengths_bad.txt"
# shellcheck disable=SC2086
expect 1 "lengths_bad.txt:1: '3 x' is not a value of 'sequence' within 1..16 and an optional count" \
  -- tune "$dec/model.onnx" $decdims --histogram "sequence=$tmp/lengths_bad.txt" --list-tasks
expect 1 "no int64 \[batch, sequence\] input 'input_ids'" -- generate "$src/examples/tiny_cnn/model.onnx" --prompt-ids 1
# Without the past's bounds: the error names the symbol that needs them, not the mask's.
expect 1 "'total_sequence' is past_sequence\+sequence, but 'past_sequence' has no bounds: bound it with --dim past_sequence=MIN..MAX" \
  -- compile "$dec/model.onnx" -o "$tmp/nopast.so" --dim batch=1..1 --dim sequence=1..16
expect 1 "--prompt-ids must be a whole number" -- generate "$dec/model.onnx" --prompt-ids 1,x
expect 0 "Greedy generation with a decoder" -- generate --help
# The same decoder exported at opset 14 with its causal mask as torch.triu (an ONNX Trilu of the
# run's length, transformers 4.38's form): PyTorch's tokens too.
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$src/scripts/export_decoder.py" "$tmp/triu" --size tiny --reference 5:8 \
    --mask triu --opset 14 >/dev/null 2>&1
  want=$(/usr/bin/python3 -c "import numpy as np; print(' '.join(map(str, np.load('$tmp/triu/tokens.npy'))))")
  # shellcheck disable=SC2086
  expect 0 "tokens: $want" -- generate "$tmp/triu/model.onnx" --prompt-ids "$prompt" --tokens 8 $decdims
  # ONNX Runtime's generation-builder form: com.microsoft.GroupQueryAttention with its rotary
  # embedding (the angles of the positions after the past: a slice at run-time starts),
  # seqlens_k and total_sequence_length counted from the mask, no position_ids; the mask's
  # total_sequence is found from the presents' declared dimension. PyTorch's tokens (ONNX
  # Runtime 1.30 generates the same), and at a past of 3 and 4 new tokens the reference's
  # logits and presents (a static import: constant starts).
  /usr/bin/python3 "$src/scripts/export_decoder.py" "$tmp/gqa" --size tiny --reference 5:8 \
    --attention gqa >/dev/null 2>&1
  gprompt=$(/usr/bin/python3 -c "import numpy as np; print(','.join(map(str, np.load('$tmp/gqa/prompt.npy')[0])))")
  want=$(/usr/bin/python3 -c "import numpy as np; print(' '.join(map(str, np.load('$tmp/gqa/tokens.npy'))))")
  # shellcheck disable=SC2086
  expect 0 "tokens: $want" -- generate "$tmp/gqa/model.onnx" --prompt-ids "$gprompt" --tokens 8 $decdims
  /usr/bin/python3 -c "
import numpy as np
r = np.random.default_rng(1)
np.save('$tmp/gqa/ids.npy', r.integers(1, 256, (1, 4)).astype(np.int64))
np.save('$tmp/gqa/mask.npy', np.ones((1, 7), np.int64))
for i in range(2):
    for n in ('key', 'value'):
        np.save(f'$tmp/gqa/past{i}{n}.npy', r.standard_normal((1, 2, 3, 16)).astype(np.float32))
"
  gin="--input input_ids=$tmp/gqa/ids.npy --input attention_mask=$tmp/gqa/mask.npy"
  gshape="--input-shape input_ids=1x4 --input-shape attention_mask=1x7"
  for i in 0 1; do
    for n in key value; do
      gin="$gin --input past_key_values.$i.$n=$tmp/gqa/past$i$n.npy"
      gshape="$gshape --input-shape past_key_values.$i.$n=1x2x3x16"
    done
  done
  # shellcheck disable=SC2086
  expect 0 "reference executor" -- run "$tmp/gqa/model.onnx" --reference $gin $gshape --output "$tmp/gqa/ref"
  # shellcheck disable=SC2086
  expect 0 "check present.1.key: matches" -- run "$tmp/gqa/model.onnx" $gin $decdims \
    --expect "logits=$tmp/gqa/ref/logits.npy" --expect "present.1.key=$tmp/gqa/ref/present.1.key.npy"
  # com.microsoft.RotaryEmbedding (partial rotary) at position_ids, interleaved, and at an offset:
  # compiled and on the reference executor, against its definition in float64.
  for form in 0 1 "0 offset"; do
    d="$tmp/rotary${form// /}"
    mkdir -p "$d"
    # shellcheck disable=SC2086
    /usr/bin/python3 "$src/tests/fixtures/rotary/make.py" "$d" $form >/dev/null 2>&1
    for how in "" --reference; do
      # shellcheck disable=SC2086
      expect 0 "check y: matches" -- run "$d/model.onnx" $how --input "x=$d/x.npy" \
        --input "pos=$d/pos.npy" --expect "y=$d/y.npy"
    done
  done
fi

# A sentence-embedding export (sentence-transformers' masked mean pooling: a ReduceSum over the
# sequence at a run-time length) with its hidden states as a second output of dynamic batch and
# sequence: one model.so, PyTorch's outputs at two shapes, one of them padded.
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$src/tests/fixtures/sentence_embedding/make.py" "$tmp/sent" >/dev/null 2>&1
  expect 0 "wrote" -- compile "$tmp/sent/model.onnx" -o "$tmp/sent/model.so" --dim batch=1..4 \
    --dim sequence=1..32
  for shape in 2_7 3_19; do
    expect 0 "check sentence_embedding: matches" -- run "$tmp/sent/model.so" \
      --input "input_ids=$tmp/sent/ids_$shape.npy" --input "attention_mask=$tmp/sent/mask_$shape.npy" \
      --expect "last_hidden_state=$tmp/sent/hidden_$shape.npy" \
      --expect "sentence_embedding=$tmp/sent/embedding_$shape.npy"
  done
fi

echo "cli errors: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
