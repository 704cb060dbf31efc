// Weight-only quantized matmul (weight_only.h): the codes of 16 columns at a time widened to
// f32 lanes in registers and multiplied into per-block sums, then scaled once per block.
#include "runtime/weight_only.h"

#include "runtime/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>

namespace tunec::rt {

namespace {

constexpr int kMaxRows = 4; // rows of A per pass over a group's codes (accumulators: 2 x 4)

// The operands of one run: A's rows copied with K padded to whole blocks (zeros), and per row
// and block the sum of A over the block (the zero points' term).
struct Operands {
  const float* a = nullptr; ///< m x kp
  const float* sums = nullptr;
  int64_t kp = 0;
};

// One group of 16 columns for R rows, the reference arithmetic: per lane, per block, the codes
// times A by fused multiply-adds into four chains (k mod 4, each in order of k), the block's sum
// (c0 + c1) + (c2 + c3), then acc = fma(scale, sum, acc) and acc = fma(-scale x zero point, sum
// of A, acc).
template <int R>
void groupScalar(const Operands& op, const uint8_t* packed, const WeightOnlyShape& s, int64_t g,
                 int64_t row, float* y, int64_t m) {
  const int64_t blocks = s.blocks();
  const uint8_t* codes = packed + g * s.groupCodeBytes();
  const float* scales = reinterpret_cast<const float*>(packed + s.codeBytes()) + g * blocks * 16;
  const float* szp = scales + s.groups() * blocks * 16;
  float acc[R][16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    float chain[R][4][16] = {};
    const uint8_t* q = codes + b * s.blockCodeBytes();
    for (int64_t j = 0; j < s.block; ++j)
      for (int c = 0; c < 16; ++c) {
        int code = s.bits == 8 ? q[j * 16 + c] : (q[(j / 2) * 16 + c] >> (4 * (j % 2))) & 15;
        for (int r = 0; r < R; ++r)
          chain[r][j % 4][c] = std::fma(op.a[(row + r) * op.kp + b * s.block + j],
                                        static_cast<float>(code), chain[r][j % 4][c]);
      }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 16; ++c) {
        const float bq = (chain[r][0][c] + chain[r][1][c]) + (chain[r][2][c] + chain[r][3][c]);
        acc[r][c] = std::fma(scales[b * 16 + c], bq, acc[r][c]);
        acc[r][c] = std::fma(-szp[b * 16 + c], op.sums[(row + r) * blocks + b], acc[r][c]);
      }
  }
  for (int r = 0; r < R && row + r < m; ++r)
    for (int c = 0; c < 16 && g * 16 + c < s.n; ++c) y[(row + r) * s.n + g * 16 + c] = acc[r][c];
}

template <int R>
__attribute__((target("avx512f"))) void group512(const Operands& op, const uint8_t* packed,
                                                 const WeightOnlyShape& s, int64_t g, int64_t row,
                                                 float* y, int64_t m) {
  const int64_t blocks = s.blocks();
  const uint8_t* codes = packed + g * s.groupCodeBytes();
  const float* scales = reinterpret_cast<const float*>(packed + s.codeBytes()) + g * blocks * 16;
  const float* szp = scales + s.groups() * blocks * 16;
  const __m512i low = _mm512_set1_epi32(15);
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    // Four independent chains per row (k mod 4): the multiply-adds overlap.
    __m512 ch[R][4];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 4; ++i) ch[r][i] = _mm512_setzero_ps();
    const uint8_t* q = codes + b * s.blockCodeBytes();
    const float* a = op.a + row * op.kp + b * s.block;
    if (s.bits == 4) {
      for (int64_t k = 0; k < s.block; k += 4) {
        for (int h = 0; h < 2; ++h) {
          __m512i v =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h)));
          __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(v, low));
          __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
          for (int r = 0; r < R; ++r) {
            const float* ar = a + r * op.kp + k + 2 * h;
            ch[r][2 * h] = _mm512_fmadd_ps(_mm512_set1_ps(ar[0]), lo, ch[r][2 * h]);
            ch[r][2 * h + 1] = _mm512_fmadd_ps(_mm512_set1_ps(ar[1]), hi, ch[r][2 * h + 1]);
          }
        }
        q += 32;
      }
    } else {
      for (int64_t k = 0; k < s.block; k += 4) {
        for (int i = 0; i < 4; ++i) {
          __m512 w = _mm512_cvtepi32_ps(
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * i))));
          for (int r = 0; r < R; ++r)
            ch[r][i] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * op.kp + k + i]), w, ch[r][i]);
        }
        q += 64;
      }
    }
    const __m512 sc = _mm512_loadu_ps(scales + b * 16);
    const __m512 nz = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(_mm512_loadu_ps(szp + b * 16)), sign));
    for (int r = 0; r < R; ++r) {
      __m512 bq =
          _mm512_add_ps(_mm512_add_ps(ch[r][0], ch[r][1]), _mm512_add_ps(ch[r][2], ch[r][3]));
      acc[r] = _mm512_fmadd_ps(sc, bq, acc[r]);
      acc[r] = _mm512_fmadd_ps(nz, _mm512_set1_ps(op.sums[(row + r) * blocks + b]), acc[r]);
    }
  }
  const int64_t valid = std::min<int64_t>(16, s.n - g * 16);
  const auto mask = static_cast<__mmask16>((1u << valid) - 1);
  for (int r = 0; r < R && row + r < m; ++r)
    _mm512_mask_storeu_ps(y + (row + r) * s.n + g * 16, mask, acc[r]);
}

template <int R>
__attribute__((target("avx2,fma"))) void group256(const Operands& op, const uint8_t* packed,
                                                  const WeightOnlyShape& s, int64_t g, int64_t row,
                                                  float* y, int64_t m) {
  const int64_t blocks = s.blocks();
  const uint8_t* codes = packed + g * s.groupCodeBytes();
  const float* scales = reinterpret_cast<const float*>(packed + s.codeBytes()) + g * blocks * 16;
  const float* szp = scales + s.groups() * blocks * 16;
  const __m256i low = _mm256_set1_epi32(15);
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const float* a = op.a + row * op.kp + b * s.block;
    // Each half of the 16 columns in turn, with the scalar path's four chains (k mod 4).
    for (int h = 0; h < 2; ++h) {
      __m256 ch[R][4];
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < 4; ++i) ch[r][i] = _mm256_setzero_ps();
      const uint8_t* q = codes + b * s.blockCodeBytes() + 8 * h;
      for (int64_t k = 0; k < s.block; q += 16) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
        if (s.bits == 4) {
          __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, low));
          __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
          for (int r = 0; r < R; ++r) {
            ch[r][k % 4] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * op.kp + k]), lo, ch[r][k % 4]);
            ch[r][(k + 1) % 4] =
                _mm256_fmadd_ps(_mm256_set1_ps(a[r * op.kp + k + 1]), hi, ch[r][(k + 1) % 4]);
          }
          k += 2;
        } else {
          __m256 w = _mm256_cvtepi32_ps(v);
          for (int r = 0; r < R; ++r)
            ch[r][k % 4] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * op.kp + k]), w, ch[r][k % 4]);
          k += 1;
        }
      }
      const __m256 sc = _mm256_loadu_ps(scales + b * 16 + 8 * h);
      const __m256 nz = _mm256_xor_ps(_mm256_loadu_ps(szp + b * 16 + 8 * h), sign);
      for (int r = 0; r < R; ++r) {
        __m256 bq =
            _mm256_add_ps(_mm256_add_ps(ch[r][0], ch[r][1]), _mm256_add_ps(ch[r][2], ch[r][3]));
        acc[r][h] = _mm256_fmadd_ps(sc, bq, acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(nz, _mm256_set1_ps(op.sums[(row + r) * blocks + b]), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < R && row + r < m; ++r) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[r][0]);
    _mm256_store_ps(out + 8, acc[r][1]);
    for (int c = 0; c < 16 && g * 16 + c < s.n; ++c) y[(row + r) * s.n + g * 16 + c] = out[c];
  }
}

using GroupFn = detail::GroupFn<Operands>;

template <int R> GroupFn groupFn(WeightOnlyIsa isa) {
  switch (isa) {
  case WeightOnlyIsa::Avx512:
    return group512<R>;
  case WeightOnlyIsa::Avx2:
    return group256<R>;
  default:
    return groupScalar<R>;
  }
}

WeightOnlyIsa widest() {
  static const WeightOnlyIsa isa = __builtin_cpu_supports("avx512f") ? WeightOnlyIsa::Avx512
                                   : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                                       ? WeightOnlyIsa::Avx2
                                       : WeightOnlyIsa::Scalar;
  return isa;
}

} // namespace

std::vector<uint8_t> packWeightOnly(const WeightOnlyShape& s, std::span<const uint8_t> codes,
                                    std::span<const float> scales,
                                    std::span<const float> zeroPoints) {
  const int64_t blocks = s.blocks(), groups = s.groups();
  std::vector<uint8_t> out(static_cast<size_t>(s.packedBytes()), 0);
  auto* sc = reinterpret_cast<float*>(out.data() + s.codeBytes());
  float* szp = sc + groups * blocks * 16;
  for (int64_t col = 0; col < s.n; ++col) {
    const int64_t g = col / 16, c = col % 16;
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* q = out.data() + g * s.groupCodeBytes() + b * s.blockCodeBytes();
      for (int64_t j = 0; j < s.block && b * s.block + j < s.k; ++j) {
        const uint8_t code = codes[static_cast<size_t>(col * s.k + b * s.block + j)];
        if (s.bits == 8)
          q[j * 16 + c] = code;
        else
          q[(j / 2) * 16 + c] |= static_cast<uint8_t>((code & 15) << (4 * (j % 2)));
      }
      const float scale = scales[static_cast<size_t>(col * blocks + b)];
      sc[(g * blocks + b) * 16 + c] = scale;
      szp[(g * blocks + b) * 16 + c] = scale * zeroPoints[static_cast<size_t>(col * blocks + b)];
    }
  }
  return out;
}

void runWeightOnlyMatmul(const float* a, const uint8_t* packed, float* y, int64_t m,
                         const WeightOnlyShape& s, int threads, WeightOnlyIsa isa) {
  if (m <= 0) return;
  if (isa == WeightOnlyIsa::Auto) isa = widest();
  const int64_t blocks = s.blocks(), kp = blocks * s.block;
  // A padded to whole blocks (rows of a multiple of kMaxRows, zeros past m) and its block sums,
  // in this thread's scratch: no allocation per run once it has grown.
  const int64_t rows = (m + kMaxRows - 1) / kMaxRows * kMaxRows;
  auto* buffer = static_cast<float*>(tunec_scratch(3, (rows * kp + rows * blocks) * 4));
  float* ap = buffer;
  float* sums = buffer + rows * kp;
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = ap + r * kp;
    if (r < m) {
      std::memcpy(dst, a + r * s.k, static_cast<size_t>(s.k) * sizeof(float));
      std::fill(dst + s.k, dst + kp, 0.f);
    } else {
      std::fill(dst, dst + kp, 0.f);
    }
    for (int64_t b = 0; b < blocks; ++b) {
      float sum = 0.f;
      for (int64_t j = 0; j < s.block; ++j) sum += dst[b * s.block + j];
      sums[r * blocks + b] = sum;
    }
  }
  const Operands op{ap, sums, kp};
  const GroupFn tail[kMaxRows] = {nullptr, groupFn<1>(isa), groupFn<2>(isa), groupFn<3>(isa)};
  detail::forEachGroup<Operands, kMaxRows>(op, packed, s, y, m, threads, groupFn<kMaxRows>(isa),
                                           tail);
}

} // namespace tunec::rt
