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

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
