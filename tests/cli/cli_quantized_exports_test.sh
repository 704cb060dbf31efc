#!/usr/bin/env bash
# Quantized models as users export them (tests/fixtures/qat_cnn: a CNN prepared for PyTorch's
# QAT and exported straight from its fake-quant modules, fbgemm's and qnnpack's forms): every
# convolution runs as an int8 kernel (the weights' QuantizeLinear folded, the quantization
# carried through the max pool, the Clip of fbgemm's 0..127 range moved before its
# QuantizeLinear), the Linear after the average pool stays fp32 saying why, and the compiled
# model equals the reference executor on the imported graph (ONNX's arithmetic).
set -uo pipefail
tunec="$1" src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx="$src/tests/fixtures/qat_cnn"
source "$(dirname "$0")/expect.sh"

# With AVX512-VNNI or AMX the int8 sums are exact; AVX2's vpmaddubsw halves 8-bit weights.
bound=2e-2
"$tunec" target | grep -q "isa features.*\(avx512_vnni\|amx\)" && bound=1e-5
for form in fbgemm_opset13 qnnpack_opset17; do
  expect 0 ": 4 Conv/MatMul/Gemm layers of u8 activations and constant s8 weights run as int8 kernels" \
    -- compile "$fx/$form.onnx" -o "$tmp/$form.so"
  expect 0 "1 quantized layer in fp32 \(Gemm '/fc/Gemm'\): its activation is f32, computed by Flatten '/Flatten', with no QuantizeLinear before the layer" \
    -- compile "$fx/$form.onnx" -o "$tmp/$form.so"
  expect 0 "Conv '/a/a.0/Conv.int8' 1x16x8x8 -> 1x16x8x8 k3x3 s1 .* in int8" \
    -- compile "$fx/$form.onnx" -o "$tmp/$form.so"
  "$tunec" run "$tmp/$form.so" --input "x=$fx/x.npy" --output "$tmp/so_$form" >/dev/null
  "$tunec" run "$fx/$form.onnx" --input "x=$fx/x.npy" --reference --output "$tmp/ref_$form" >/dev/null
  compare "$tmp/ref_$form/y.npy" "$tmp/so_$form/y.npy" --max-rel-l2 "$bound"
done
# inspect --fusion names the layer left fp32 from the graph lower-quantized-layers reads.
expect 0 "quantized layer in fp32: Gemm '/fc/Gemm': its activation is f32" \
  -- inspect "$fx/fbgemm_opset13.onnx" --fusion --summary

# ONNX Runtime's weight-only MatMulNBits (4- and 8-bit, packed, float and no zero points, a bias,
# partial last blocks): the reference's output is the float64 one; compiled, its accuracy level 4
# quantizes the activations per block where the CPU has VNNI (within 2e-2).
nb="$src/tests/fixtures/matmul_nbits"
expect 0 "check y: matches" -- run "$nb/model.onnx" --input "x=$nb/x.npy" --expect "y=$nb/y.npy" --tolerance 2e-2
expect 0 "check y: matches" -- run "$nb/model.onnx" --reference --input "x=$nb/x.npy" \
  --expect "y=$nb/y.npy"

# int4 QDQ (opset 21), as ONNX Runtime's quantizer writes weights in QDQ form: DequantizeLinear
# with block_size of int4 codes and zero points (and uint4 without, a partial last block) ->
# MatMul runs as MatMulNBits on the weight-only kernel (int8 activations where the CPU has VNNI:
# within 1e-2; ONNX Runtime 1.30 is 1.0e-3 from the float64 output, tunec 2.2e-3 on AVX512-VNNI),
# and on the reference the float64 output.
qdq="$src/tests/fixtures/qdq_int4"
expect 0 "check y: matches" -- run "$qdq/model.onnx" --input "x=$qdq/x.npy" --expect "y=$qdq/y.npy" --tolerance 1e-2
expect 0 "check y: matches" -- run "$qdq/model.onnx" --reference --input "x=$qdq/x.npy" --expect "y=$qdq/y.npy"
expect 0 "wrote" -- compile "$qdq/model.onnx" -o "$tmp/qdq.so"
expect 0 "MatMulNBits 'fc1' 3x64 x 24 \(4-bit, block 32" -- bench "$tmp/qdq.so" --runs 1 --warmup 0 --profile
expect 0 "MatMulNBits 'fc2' 3x24 x 8 \(4-bit, block 16" -- bench "$tmp/qdq.so" --runs 1 --warmup 0 --profile

# MatMulInteger and ConvInteger (tests/fixtures/integer_ops/make.py writes them with their exact
# outputs): sums past 2^24 and past 2^31 (wrapping), per-row, per-column, per-channel and
# rank-N zero points, equal to the int64 sums wrapped to int32 bit for bit in the JIT, in a
# model.so and in the reference; the provably exact ones of constant weights on the int8 kernels,
# the others on the runtime's integer steps; a zero point of the wrong length is an error naming
# it.
io="$tmp/integer_ops"
mkdir -p "$io"
/usr/bin/python3 "$src/tests/fixtures/integer_ops/make.py" "$io"
for m in mmi_long mmi_wrap mmi_zp mmi_nd mmi_small convi convi_small; do
  inputs=()
  for f in "$io/${m}"_?.npy; do
    name=$(basename "$f" .npy)
    name=${name#"${m}_"}
    [ "$name" = y ] || inputs+=(--input "$name=$f")
  done
  expect 0 "check y: matches .* largest difference 0.00e\+00" -- run "$io/$m.onnx" "${inputs[@]}" \
    --expect "y=$io/${m}_y.npy" --tolerance 0
  expect 0 "check y: matches .* largest difference 0.00e\+00" -- run "$io/$m.onnx" "${inputs[@]}" \
    --reference --expect "y=$io/${m}_y.npy" --tolerance 0
  expect 0 "wrote" -- compile "$io/$m.onnx" -o "$tmp/$m.so"
  expect 0 "check y: matches .* largest difference 0.00e\+00" -- run "$tmp/$m.so" "${inputs[@]}" \
    --expect "y=$io/${m}_y.npy" --tolerance 0
done
expect 0 "IntegerMatMul 'y/float.int8' .* in int8" -- compile "$io/mmi_small.onnx" -o "$tmp/small.so"
expect 0 "0 heavy kernels" -- compile "$io/convi.onnx" -o "$tmp/convi.so"
expect 0 "1 integer product summed exactly in int32 on the runtime's integer steps \(Conv 'convinteger'\)" \
  -- compile "$io/convi.onnx" -o "$tmp/convi.so"
# ONNX Runtime's dynamic quantization of a ReLU layer with u8 weights (zero point 131): the
# activation's zero point is 0, the layer an int8 kernel (its weights shifted to s8, the zero
# point's rest added from the window sums): its sums exact where they stay below 2^24 (within an
# ulp of the Cast's rounding beyond), the rescaling in the kernel's epilogue within an ulp.
for m in convi_dyn convi_dyn_big; do
  expect 0 "2 Conv/MatMul/Gemm layers of u8 activations and constant s8 weights run as int8" \
    -- compile "$io/$m.onnx" -o "$tmp/$m.so"
  expect 0 "check y: matches" -- run "$tmp/$m.so" --input "x=$io/${m}_x.npy" \
    --expect "y=$io/${m}_y.npy" --tolerance 1e-6
  expect 0 "check y: matches" -- run "$io/$m.onnx" --reference --input "x=$io/${m}_x.npy" \
    --expect "y=$io/${m}_y.npy" --tolerance 1e-6
done
# The same for a MatMul of signed activations (a computed zero point): the int8 kernel, the
# weights' zero point's rest from the row sums (an int8 layer of ones), equal to ONNX Runtime's
# arithmetic bit for bit (its scale range / 255 a division, as DynamicQuantizeLinear defines it).
for m in mmi_dyn mmi_dyn_big; do
  expect 0 "2 Conv/MatMul/Gemm layers of u8 activations and constant s8 weights run as int8" \
    -- compile "$io/$m.onnx" -o "$tmp/$m.so"
  expect 0 "check y: matches" -- run "$tmp/$m.so" --input "x=$io/${m}_x.npy" \
    --expect "y=$io/${m}_y.npy" --tolerance 1e-6
done
expect 0 "check y: matches .* largest difference 0.00e\+00" -- run "$tmp/mmi_dyn.so" \
  --input "x=$io/mmi_dyn_x.npy" --expect "y=$io/mmi_dyn_y.npy" --tolerance 0
expect 1 "MatMulInteger's a_zero_point 'za' is u8\[7\]: it must be a scalar, a vector of its 5 rows" \
  -- run "$io/mmi_badzp.onnx" --input "a=$io/mmi_badzp_a.npy"

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
