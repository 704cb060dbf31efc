#!/usr/bin/env bash
# `tunec quantize`: the bundled example quantized from a calibration folder and from random
# samples; the QDQ model it writes compiles, runs compiled exactly as the reference executor
# runs it, stays near the fp32 model, and says it is quantized; bad flags are clear errors.
set -uo pipefail
tunec="$1" src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ex="$src/examples/tiny_cnn"
source "$(dirname "$0")/expect.sh"

mkdir "$tmp/calib"
/usr/bin/python3 - "$tmp/calib" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
for i in range(6):
    np.save(f"{sys.argv[1]}/sample{i}.npy", rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
PY
expect 0 "quantized 4 of 4 Conv/MatMul/Gemm nodes \(4 activations calibrated on 6 samples, u8 activations, per-channel weights\)" \
  -- quantize "$ex/model.onnx" -o "$tmp/q.onnx" --calibration "$tmp/calib" --per-channel
# A sample of another type or shape says what it holds and what the input takes.
mkdir "$tmp/calib_f64"
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/calib_f64/s.npy', np.zeros((1, 3, 8, 8)))"
expect 1 "calib_f64/s.npy does not give input 'x' as f32\[1x3x32x32\]: it holds f64\[1x3x8x8\]; save the sample with that type and shape" \
  -- quantize "$ex/model.onnx" -o "$tmp/q_bad.onnx" --calibration "$tmp/calib_f64"
# The Gemm and the three convolutions run as int8 kernels (the first reads the quantized image
# NCHW, its 3 channels rounded up to a quad). On an AVX2 target their 8-bit weights are halved to
# the 7 bits vpmaddubsw takes, which the report warns about; with AVX512-VNNI or AMX, or with
# --weight-bits 7 anywhere, the int8 sums are exact.
expect 0 "quantized model \([0-9]+ QuantizeLinear/DequantizeLinear nodes\): 4 Conv/MatMul/Gemm layers .* run as int8 kernels" -- compile "$tmp/q.onnx" -o "$tmp/q.so"
expect 0 "Conv '/conv1/Conv.int8' 1x3x32x32 -> 1x16x32x32 k3x3 s1 .*\(reads its input NCHW\) in int8" \
  -- compile "$tmp/q.onnx" -o "$tmp/q.so"
# Each layer's bias is written as an int32 with the scale of its sums (as exporters write it):
# the int8 kernel adds it to the integer sums, then multiplies once (QLinearConv's arithmetic).
expect 0 "Conv '/conv2/Conv.int8' 1x16x32x32 -> 1x32x16x16 k3x3 s2 \+ bias\+mul\+relu in int8" \
  -- inspect "$tmp/q.onnx" --fusion
expect 0 "IntegerMatMul '/fc/Gemm.int8' .* \+ bias\+mul in int8" -- inspect "$tmp/q.onnx" --fusion
# inspect --fusion says the same: which kernels run int8 (each step too).
expect 0 "  4 kernels run in int8 \(u8 activations, s8 weights\)" -- inspect "$tmp/q.onnx" --fusion --summary
expect 0 "step [0-9]+ generated .* in int8" -- inspect "$tmp/q.onnx" --fusion
# A layer that stays fp32 is named with the reason: an s8 activation.
expect 0 "quantized 4 of 4 Conv/MatMul/Gemm nodes .*s8 activations" \
  -- quantize "$ex/model.onnx" -o "$tmp/q_s8.onnx" --calibration "$tmp/calib" --activations s8
expect 0 "quantized layer in fp32: Conv '/conv1/Conv': its activation is s8" \
  -- inspect "$tmp/q_s8.onnx" --fusion --summary
"$tunec" run "$tmp/q.so" --input "x=$ex/x.npy" --output "$tmp/so" >/dev/null
"$tunec" run "$tmp/q.onnx" --input "x=$ex/x.npy" --reference --output "$tmp/ref" >/dev/null
if "$tunec" target | grep -q "isa features.*\(avx512_vnni\|amx\)"; then
  compare "$tmp/ref/y.npy" "$tmp/so/y.npy" --max-rel-l2 1e-5
else
  expect 0 "warning: 3 int8 kernels have 8-bit weights, which AVX2's vpmaddubsw kernel halves to 7 bits .* --weight-bits 7" \
    -- compile "$tmp/q.onnx" -o "$tmp/q.so"
  compare "$tmp/ref/y.npy" "$tmp/so/y.npy" --max-rel-l2 2e-2
fi
expect 0 "quantized 4 of 4 Conv/MatMul/Gemm nodes" \
  -- quantize "$ex/model.onnx" -o "$tmp/q7.onnx" --calibration "$tmp/calib" --per-channel --weight-bits 7
expect 0 ": 4 Conv/MatMul/Gemm layers .* run as int8 kernels" -- compile "$tmp/q7.onnx" -o "$tmp/q7.so"
"$tunec" run "$tmp/q7.so" --input "x=$ex/x.npy" --output "$tmp/so7" >/dev/null
"$tunec" run "$tmp/q7.onnx" --input "x=$ex/x.npy" --reference --output "$tmp/ref7" >/dev/null
compare "$tmp/ref7/y.npy" "$tmp/so7/y.npy" --max-rel-l2 1e-5
expect 1 "--weight-bits must be 8 or 7" -- quantize "$ex/model.onnx" -o "$tmp/q6.onnx" --random 2 --weight-bits 6
# Percentile calibration: the middle 99.9% of each activation's values; runs and compiles.
expect 0 "calibrated on 6 samples \(percentile 99.9\)" \
  -- quantize "$ex/model.onnx" -o "$tmp/qp.onnx" --calibration "$tmp/calib" --method percentile --percentile 99.9
expect 0 "run as int8 kernels" -- compile "$tmp/qp.onnx" -o "$tmp/qp.so"
expect 1 "--percentile must be above 50" -- quantize "$ex/model.onnx" -o "$tmp/qp2.onnx" --random 2 --method percentile --percentile 50
expect 1 "--percentile needs --method percentile" -- quantize "$ex/model.onnx" -o "$tmp/qp2.onnx" --random 2 --percentile 99
expect 1 "--dynamic quantizes activations per run and takes no calibration samples" -- quantize "$ex/model.onnx" -o "$tmp/qd.onnx" --dynamic --random 2
expect 0 "quantized 1 of 4 Conv/MatMul/Gemm nodes \(dynamic: MatMul/Gemm activations quantized per run to u8" -- quantize "$ex/model.onnx" -o "$tmp/qd.onnx" --dynamic --weight-bits 7
expect 0 ": 1 Conv/MatMul/Gemm layers .* run as int8 kernels" -- compile "$tmp/qd.onnx" -o "$tmp/qd.so"
expect 0 "note: Conv '/conv1/Conv' stays float: a convolution \(--dynamic quantizes MatMul/Gemm\)" \
  -- quantize "$ex/model.onnx" -o "$tmp/qd.onnx" --dynamic --weight-bits 7
# A layer whose weights are a vector stays float, saying so.
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 - "$tmp/vec.onnx" <<'PY'
import sys, torch
class Vec(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8))
        self.fc = torch.nn.Linear(8, 8)
    def forward(self, x):
        return self.fc(x) @ self.w
torch.onnx.export(Vec(), (torch.randn(2, 8),), sys.argv[1], input_names=["x"], opset_version=13)
PY
  expect 0 "note: MatMul '.*' stays float: its weights are a vector" \
    -- quantize "$tmp/vec.onnx" -o "$tmp/vecq.onnx" --random 2
fi
"$tunec" run "$tmp/qd.so" --input "x=$ex/x.npy" --output "$tmp/sod" >/dev/null
"$tunec" run "$tmp/qd.onnx" --input "x=$ex/x.npy" --reference --output "$tmp/refd" >/dev/null
compare "$tmp/refd/y.npy" "$tmp/sod/y.npy" --max-rel-l2 1e-5
expect 1 "--method kl is not one of minmax, percentile, entropy" -- quantize "$ex/model.onnx" -o "$tmp/qp2.onnx" --random 2 --method kl
# Entropy calibration (the clipping threshold of least KL divergence): runs, compiles to int8
# kernels equal to the reference, and reports the accuracy against the fp32 model on the first
# calibration samples; --accuracy-samples 0 skips that report.
expect 0 "calibrated on 6 samples \(entropy\)" \
  -- quantize "$ex/model.onnx" -o "$tmp/qe.onnx" --calibration "$tmp/calib" --method entropy --weight-bits 7
expect 0 "against the fp32 model on 4 calibration samples \(reference executor\):" \
  -- quantize "$ex/model.onnx" -o "$tmp/qe.onnx" --calibration "$tmp/calib" --method entropy --weight-bits 7
expect 0 "  y +relative L2 [0-9.e+-]+, max abs [0-9.e+-]+, top-1 agreement 100.0% \(4 rows\)" \
  -- quantize "$ex/model.onnx" -o "$tmp/qe.onnx" --calibration "$tmp/calib" --method entropy --weight-bits 7
if "$tunec" quantize "$ex/model.onnx" -o "$tmp/qe0.onnx" --calibration "$tmp/calib" --accuracy-samples 0 2>/dev/null | grep -q "against the fp32 model"; then
  echo "FAIL: --accuracy-samples 0 still checks"; failures=$((failures + 1))
fi
checks=$((checks + 1))
expect 0 ": 4 Conv/MatMul/Gemm layers .* run as int8 kernels" -- compile "$tmp/qe.onnx" -o "$tmp/qe.so"
"$tunec" run "$tmp/qe.so" --input "x=$ex/x.npy" --output "$tmp/soe" >/dev/null
"$tunec" run "$tmp/qe.onnx" --input "x=$ex/x.npy" --reference --output "$tmp/refe" >/dev/null
compare "$tmp/refe/y.npy" "$tmp/soe/y.npy" --max-rel-l2 1e-5
compare "$ex/expected_y.npy" "$tmp/so/y.npy" --max-rel-l2 0.05
expect 0 "y +relative L2 [0-9.e+-]+, max abs [0-9.e+-]+, top-1 agreement [0-9.]+% \(5 rows\)" \
  -- accuracy "$tmp/q.onnx" --against "$ex/model.onnx" --random 5
expect 1 "input .x. differs between" -- accuracy "$tmp/q.onnx" --against /usr/share/libonnx-testdata/data/node/test_relu/model.onnx --random 1
expect 0 "s8 activations, per-tensor weights" -- quantize "$ex/model.onnx" -o "$tmp/r.onnx" --random 3 --activations s8
"$tunec" run "$tmp/r.onnx" --input "x=$ex/x.npy" --output "$tmp/r" >/dev/null
compare "$ex/expected_y.npy" "$tmp/r/y.npy" --max-rel-l2 0.05

expect 1 "give the calibration samples with --calibration DIR, or --random N" -- quantize "$ex/model.onnx" -o "$tmp/x.onnx"
expect 1 "is the input model" -- quantize "$ex/model.onnx" -o "$ex/model.onnx" --random 1
expect 1 "--activations must be u8 or s8" -- quantize "$ex/model.onnx" -o "$tmp/x.onnx" --random 1 --activations u4
mkdir "$tmp/empty"
expect 1 "holds no samples" -- quantize "$ex/model.onnx" -o "$tmp/x.onnx" --calibration "$tmp/empty"
mkdir "$tmp/wrong" && /usr/bin/python3 -c "import numpy as np; np.save('$tmp/wrong/a.npy', np.zeros((1, 3, 8, 8), np.float32))"
expect 1 "calibration sample .*/wrong/a.npy does not give input 'x' as f32\[1x3x32x32\]" -- quantize "$ex/model.onnx" -o "$tmp/x.onnx" --calibration "$tmp/wrong"
# A NaN in one calibration sample: an error naming the file, input and element, or with
# --skip-nonfinite a warning naming it and the ranges from the other samples.
mkdir "$tmp/nan" && cp "$tmp/calib"/sample[0-2].npy "$tmp/nan/"
/usr/bin/python3 -c "import numpy as np; a = np.ones((1, 3, 32, 32), np.float32); a[0, 1, 2, 3] = np.nan; np.save('$tmp/nan/sample9.npy', a)"
expect 1 "calibration sample .*/nan/sample9.npy: input 'x' has a NaN at element 1091; fix or remove the sample, or give --skip-nonfinite" -- quantize "$ex/model.onnx" -o "$tmp/x.onnx" --calibration "$tmp/nan"
expect 0 "warning: skipped calibration sample .*/nan/sample9.npy: input 'x' has a NaN at element 1091" -- quantize "$ex/model.onnx" -o "$tmp/nan.onnx" --calibration "$tmp/nan" --skip-nonfinite
expect 0 "calibrated on 3 samples" -- quantize "$ex/model.onnx" -o "$tmp/nan.onnx" --calibration "$tmp/nan" --skip-nonfinite
# A finite sample the fp32 model answers with a NaN (3e38 pixels overflow): the same, naming the
# output and element (it had written a degraded model with exit 0 and "relative L2 inf").
mkdir "$tmp/huge" && cp "$tmp/calib"/sample[0-2].npy "$tmp/huge/"
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/huge/sample9.npy', np.full((1, 3, 32, 32), 3e38, np.float32))"
expect 1 "calibration sample .*/huge/sample9.npy: the fp32 model's output 'y' is NaN at element 0 on it; fix or remove the sample, or give --skip-nonfinite" -- quantize "$ex/model.onnx" -o "$tmp/x.onnx" --calibration "$tmp/huge"
expect 0 "calibrated on 3 samples" -- quantize "$ex/model.onnx" -o "$tmp/huge.onnx" --calibration "$tmp/huge" --skip-nonfinite
check_absent() { checks=$((checks + 1)); [ ! -e "$1" ] || { echo "FAIL: $1 was written"; failures=$((failures + 1)); }; }
check_absent "$tmp/x.onnx"
expect 0 "Post-training static quantization" -- quantize --help

# Weight-only int4 and int8 of the decoder fixture: MatMulNBits that ONNX Runtime reads, compiled
# to the weight-only kernel, its output the reference executor's of the quantized model.
dec="$src/tests/fixtures/decoder_tiny"
# accuracy level 0 (f32 activations): the reference's arithmetic; 4: activations quantized per
# block to int8 where the CPU has VNNI, within 2e-2 (the kernels' exact checks: WeightOnly.*).
expect 0 "quantized 15 MatMul nodes to int4 weights in blocks of 32" -- quantize "$dec/model.onnx" -o "$tmp/int4.onnx" --weights-only int4 --accuracy-level 0
expect 0 "quantized 15 MatMul nodes to int8 weights in blocks of 64" -- quantize "$dec/model.onnx" -o "$tmp/int8.onnx" --weights-only int8 --block 64 --accuracy-level 0
expect 0 "quantized 15 MatMul nodes to int4 weights in blocks of 32" -- quantize "$dec/model.onnx" -o "$tmp/int4l4.onnx" --weights-only int4
/usr/bin/python3 -c "
import numpy as np
p = np.load('$dec/prompt.npy'); n = p.shape[1]
np.save('$tmp/ids.npy', p); np.save('$tmp/mask.npy', np.ones((1, n), np.int64))
np.save('$tmp/pos.npy', np.arange(n)[None].astype(np.int64)); np.save('$tmp/past.npy', np.zeros((1, 2, 0, 16), np.float32))"
feed="--input input_ids=$tmp/ids.npy --input attention_mask=$tmp/mask.npy --input position_ids=$tmp/pos.npy"
fixed="--input-shape input_ids=1x5 --input-shape attention_mask=1x5 --input-shape position_ids=1x5"
for i in 0 1; do
  for kv in key value; do
    feed="$feed --input past_key_values.$i.$kv=$tmp/past.npy"
    fixed="$fixed --input-shape past_key_values.$i.$kv=1x2x0x16"
  done
done
for q in int4 int8 int4l4; do
  tolerance=1e-4
  [ "$q" = int4l4 ] && tolerance=2e-2
  # shellcheck disable=SC2086
  "$tunec" run "$tmp/$q.onnx" --reference $feed $fixed --output "$tmp/ref_$q" >/dev/null
  # shellcheck disable=SC2086
  expect 0 "check logits: matches" -- run "$tmp/$q.onnx" $feed --dim batch=1..1 --dim sequence=1..16 \
    --dim past_sequence=0..32 --expect "logits=$tmp/ref_$q/logits.npy" --tolerance $tolerance
done
expect 1 "--accuracy-level must be 4 or 0, not 2" -- quantize "$dec/model.onnx" -o "$tmp/x.onnx" --weights-only int4 --accuracy-level 2
expect 1 "--weights-only must be int4 or int8, not int3" -- quantize "$dec/model.onnx" -o "$tmp/x.onnx" --weights-only int3
expect 1 "--block must be" -- quantize "$dec/model.onnx" -o "$tmp/x.onnx" --weights-only int4 --block 8
expect 1 "the block must be a power of two of at least 16, not 48" -- quantize "$dec/model.onnx" -o "$tmp/x.onnx" --weights-only int4 --block 48
expect 1 "--block and --accuracy-level go with --weights-only" -- quantize "$dec/model.onnx" -o "$tmp/x.onnx" --random 1 --block 32

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
