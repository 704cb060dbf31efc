// Weight-only quantized matmul: Y[m, n] = sum_k A[m, k] W[n, k], W stored as blockwise 4- or
// 8-bit codes with a scale and zero point per (column, block of K), dequantized in registers.
// The decode of a language model (a few rows of A against every weight once) is a stream of the
// codes: they are read once, at 4.5 (or 8.5) bits a weight instead of 32.
#pragma once

#include "runtime/parallel.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace tunec::rt {

/// The kernel's layout: columns in groups of 16 (one AVX-512 vector of outputs), per group and
/// block of K the codes of 16 columns side by side (4-bit: byte c of pair p holds column c's
/// codes of k = 2p (low nibble) and 2p + 1 (high)), then per group and block 16 scales and 16
/// scale x zero point products.
struct WeightOnlyShape {
  int64_t k = 0, n = 0, bits = 4, block = 32;
  int64_t blocks() const { return (k + block - 1) / block; }
  int64_t groups() const { return (n + 15) / 16; }
  /// Bytes of one block's codes of 16 columns, and of one group's codes.
  int64_t blockCodeBytes() const { return 16 * block * bits / 8; }
  int64_t groupCodeBytes() const { return blocks() * blockCodeBytes(); }
  int64_t codeBytes() const { return groups() * groupCodeBytes(); }
  int64_t packedBytes() const { return codeBytes() + 2 * groups() * blocks() * 16 * 4; }
  /// The int8-activation layout: f32 scales and u8 zero points.
  int64_t packedBytesQ8() const { return codeBytes() + groups() * blocks() * 16 * 5; }
  bool valid() const {
    return k > 0 && n > 0 && (bits == 4 || bits == 8) && block >= 16 && block % 16 == 0;
  }
};

/// Packs weights given as codes[n][k] (0..2^bits-1), scales[n][block] and zeroPoints[n][block]
/// (float) into the kernel's layout (WeightOnlyShape::packedBytes bytes). Codes past k are 0.
std::vector<uint8_t> packWeightOnly(const WeightOnlyShape& s, std::span<const uint8_t> codes,
                                    std::span<const float> scales,
                                    std::span<const float> zeroPoints);

/// The instruction set a run uses: the widest the CPU has (Auto), or a narrower one (tests
/// compare them: every path computes each output with the same fused multiply-adds in the same
/// order, so they agree bit for bit).
enum class WeightOnlyIsa { Auto, Avx512, Avx2, Scalar };

/// Y (m x n, row-major) = A (m x k, row-major) times the packed weights transposed, on up to
/// `threads` threads (split by column groups).
void runWeightOnlyMatmul(const float* a, const uint8_t* packed, float* y, int64_t m,
                         const WeightOnlyShape& s, int threads,
                         WeightOnlyIsa isa = WeightOnlyIsa::Auto);

/// int8 activations (ONNX Runtime's accuracy level 4, as llama.cpp computes): each row of A
/// quantized per block of K to int8 (symmetric, scale = max|a| / 127, round half to even), the
/// block's integer sum of codes x quantized activations exact (vpdpbusd), then
/// acc = fma(float(sum - zero point x sum of the quantized activations), scale x its scale, acc).
/// The layout: per group and block, steps of 64 bytes holding 4 consecutive k of 16 columns
/// (4-bit: low nibbles k, high nibbles k + 4 of 8), then 16 f32 scales per group and block, then
/// 16 u8 zero points per group and block (packedBytesQ8 bytes).
/// Zero points must be integers within the codes' range; blocks up to 256 (sums exact in f32).
bool weightOnlyQ8Supports(const WeightOnlyShape& s, std::span<const float> zeroPoints);
std::vector<uint8_t> packWeightOnlyQ8(const WeightOnlyShape& s, std::span<const uint8_t> codes,
                                      std::span<const float> scales,
                                      std::span<const float> zeroPoints);
/// Vnni where the CPU has AVX512-VNNI (Auto), else the scalar path of the same arithmetic.
enum class WeightOnlyQ8Isa { Auto, Vnni, Scalar };
void runWeightOnlyMatmulQ8(const float* a, const uint8_t* packed, float* y, int64_t m,
                           const WeightOnlyShape& s, int threads,
                           WeightOnlyQ8Isa isa = WeightOnlyQ8Isa::Auto);

namespace detail {

/// A group-of-16-columns kernel for rows [row, row + R) of A (both weight-only kernels).
template <typename Operands>
using GroupFn = void (*)(const Operands&, const uint8_t*, const WeightOnlyShape&, int64_t, int64_t,
                         float*, int64_t);

/// Runs `full` (kRows rows) or `tail[left]` over every column group and chunk of m rows, each
/// thread a contiguous range of groups: a row chunk reads a group's codes while they are in
/// cache, and each thread streams its own part of the weights once.
template <typename Operands, int kRows>
void forEachGroup(const Operands& op, const uint8_t* packed, const WeightOnlyShape& s, float* y,
                  int64_t m, int threads, GroupFn<Operands> full,
                  const GroupFn<Operands> (&tail)[kRows]) {
  struct Ctx {
    const Operands* op;
    const uint8_t* packed;
    const WeightOnlyShape* s;
    float* y;
    int64_t m, tasks;
    GroupFn<Operands> full;
    const GroupFn<Operands>* tail;
  } ctx{&op, packed, &s, y, m, std::min<int64_t>(std::max(threads, 1), s.groups()), full, tail};
  tunec_parallel_for(
      [](void* c, int64_t task) {
        const auto* x = static_cast<const Ctx*>(c);
        const int64_t groups = x->s->groups();
        const int64_t lo = groups * task / x->tasks, hi = groups * (task + 1) / x->tasks;
        for (int64_t g = lo; g < hi; ++g)
          for (int64_t row = 0; row < x->m; row += kRows) {
            const int64_t left = x->m - row;
            (left >= kRows ? x->full : x->tail[left])(*x->op, x->packed, *x->s, g, row, x->y, x->m);
          }
      },
      &ctx, ctx.tasks, threads);
}

} // namespace detail

} // namespace tunec::rt
