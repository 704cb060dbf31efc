#!/usr/bin/env bash
# Negative CLI tests: every user error exits non-zero with a message naming the problem.
set -uo pipefail
tunec="$1" src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$src/examples/tiny_cnn/model.onnx"
failures=0 checks=0

# expect EXIT_CODE PATTERN -- ARGS...: runs tunec, checks the exit code and that the output matches.
expect() {
  local code="$1" pattern="$2"
  shift 3
  local out rc
  out=$("$tunec" "$@" 2>&1)
  rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: tunec $* -> exit $rc (want $code), output:"
    echo "$out" | sed 's/^/    /'
    echo "    (wanted a match for: $pattern)"
    failures=$((failures + 1))
  fi
}

for cmd in run inspect ops bench-op target; do expect 0 "^usage: tunec $cmd" -- "$cmd" --help; done
expect 1 "tunec bench-op: --m is required" -- bench-op matmul --n 4 --k 4
expect 1 "conv2d config: ic_block=5 must divide ic=8" -- bench-op conv2d --ic 8 --h 4 --w 4 --oc 16 --kh 1 --kw 1 --config '{"isa":"avx2","oc_block":16,"ow_block":4,"ic_block":5,"oh_block":1,"rows_per_tile":1,"loop_order":"oc_oh","parallel":"none"}'
expect 1 "tunec bench-op: unknown op .gemm." -- bench-op gemm --m 1
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
echo garbage >"$tmp/garbage.npy"
expect 1 "neither a .npy file nor a serialized ONNX TensorProto" -- run "$model" --input x="$tmp/garbage.npy"
expect 1 "--input-shape 'x=1xAx3' is not of the form" -- inspect "$model" --input-shape x=1xAx3
expect 1 "--input-shape names 'z', which is not a model input \(inputs: x\)" -- inspect "$model" --input-shape z=1x3x32x32
expect 1 "--format must be npy or pb" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --format csv
expect 0 "= Conv\(%x.*\{kernel=\[3,3\] strides=\[1,1\]" -- inspect "$model"
expect 0 "Conv +3" -- inspect "$model" --summary
expect 0 "fusion: 11 nodes -> 6 kernels \(4 anchored, 2 loop kernels\)" -- inspect "$model" --summary --fusion
expect 0 "kernel 2 \(anchor\): Conv Add Relu" -- inspect "$model" --fusion
expect 0 "arena: 10 tensors, .* \(peak / bound 1.000\)" -- inspect "$model" --summary --memory
expect 0 "// after fold-constants \(unchanged\)" -- inspect "$model" --summary --print-after-all
expect 0 "ran 11 nodes" -- run "$model" --input x="$src/examples/tiny_cnn/x.npy" --optimize

echo "cli errors: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
