// Weight-only quantized matmul: Y[m, n] = sum_k A[m, k] W[n, k], W stored as blockwise 4- or
// 8-bit codes with a scale and zero point per (column, block of K), dequantized in registers.
// The decode of a language model (a few rows of A against every weight once) is a stream of the
// codes: they are read once, at 4.5 (or 8.5) bits a weight instead of 32.
#pragma once

#include <cstdint>
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
  int64_t codeBytes() const { return groups() * blocks() * 16 * block * bits / 8; }
  int64_t packedBytes() const { return codeBytes() + 2 * groups() * blocks() * 16 * 4; }
  bool valid() const {
    return k > 0 && n > 0 && (bits == 4 || bits == 8) && block >= 16 && block % 16 == 0;
  }
};

/// Packs weights given as codes[n][k] (0..2^bits-1), scales[n][block] and zeroPoints[n][block]
/// (float) into the kernel's layout (WeightOnlyShape::packedBytes bytes). Codes past k are 0.
std::vector<uint8_t> packWeightOnly(const WeightOnlyShape& s, const std::vector<uint8_t>& codes,
                                    const std::vector<float>& scales,
                                    const std::vector<float>& zeroPoints);

/// The instruction set a run uses: the widest the CPU has (Auto), or a narrower one (tests
/// compare them: every path computes each output with the same fused multiply-adds in the same
/// order, so they agree bit for bit).
enum class WeightOnlyIsa { Auto, Avx512, Avx2, Scalar };

/// Y (m x n, row-major) = A (m x k, row-major) times the packed weights transposed, on up to
/// `threads` threads (split by column groups).
void runWeightOnlyMatmul(const float* a, const uint8_t* packed, float* y, int64_t m,
                         const WeightOnlyShape& s, int threads,
                         WeightOnlyIsa isa = WeightOnlyIsa::Auto);

} // namespace tunec::rt
