// Weight-only matmul with int8 activations (weight_only.h): the codes times the activations
// quantized per block as exact integer dot products (AVX512-VNNI's vpdpbusd: 64 products an
// instruction), one float multiply-add per block and column.
#include "runtime/parallel.h"
#include "runtime/weight_only.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>

namespace tunec::rt {

namespace {

constexpr int kRows = 4; // rows of A per pass over a group's codes

struct Q8Operands {
  const int8_t* q = nullptr;    ///< rows x kp quantized activations
  const float* scale = nullptr; ///< rows x blocks
  const int32_t* sum = nullptr; ///< rows x blocks: the block's sum of quantized activations
  int64_t kp = 0;
};

const float* scalesOf(const uint8_t* packed, const WeightOnlyShape& s, int64_t g) {
  return reinterpret_cast<const float*>(packed + s.codeBytes()) + g * s.blocks() * 16;
}
const uint8_t* zerosOf(const uint8_t* packed, const WeightOnlyShape& s, int64_t g) {
  return packed + s.codeBytes() + s.groups() * s.blocks() * 16 * 4 + g * s.blocks() * 16;
}

// The reference arithmetic, lane by lane.
template <int R>
void groupScalar(const Q8Operands& op, const uint8_t* packed, const WeightOnlyShape& s, int64_t g,
                 int64_t row, float* y, int64_t m) {
  const int64_t blocks = s.blocks();
  const float* scales = scalesOf(packed, s, g);
  const uint8_t* zeros = zerosOf(packed, s, g);
  float acc[R][16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t sum[R][16] = {};
    const uint8_t* q = packed + g * s.groupCodeBytes() + b * s.blockCodeBytes();
    const int64_t kPerStep = s.bits == 4 ? 8 : 4;
    for (int64_t t = 0; t < s.block / kPerStep; ++t, q += 64)
      for (int c = 0; c < 16; ++c)
        for (int j = 0; j < 4; ++j) {
          const int byte = q[c * 4 + j];
          const int64_t k = b * s.block + t * kPerStep + j;
          for (int r = 0; r < R; ++r) {
            const int8_t* a = op.q + (row + r) * op.kp;
            if (s.bits == 4)
              sum[r][c] += (byte & 15) * a[k] + (byte >> 4) * a[k + 4];
            else
              sum[r][c] += byte * a[k];
          }
        }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 16; ++c) {
        const int64_t at = (row + r) * blocks + b;
        const auto v = static_cast<float>(sum[r][c] - int32_t{zeros[b * 16 + c]} * op.sum[at]);
        acc[r][c] = std::fma(v, scales[b * 16 + c] * op.scale[at], acc[r][c]);
      }
  }
  for (int r = 0; r < R && row + r < m; ++r)
    for (int c = 0; c < 16 && g * 16 + c < s.n; ++c) y[(row + r) * s.n + g * 16 + c] = acc[r][c];
}

// acc += the dot products of the codes' u8 quads with four s8 activations at x.
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void
dot(__m512i& acc, __m512i codes, const int8_t* x) {
  int32_t four;
  std::memcpy(&four, x, 4);
  acc = _mm512_dpbusd_epi32(acc, codes, _mm512_set1_epi32(four));
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
groupVnni(const Q8Operands& op, const uint8_t* packed, const WeightOnlyShape& s, int64_t g,
          int64_t row, float* y, int64_t m) {
  const int64_t blocks = s.blocks();
  const float* scales = scalesOf(packed, s, g);
  const uint8_t* zeros = zerosOf(packed, s, g);
  const __m512i nibble = _mm512_set1_epi8(15);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  // Four independent sums a row, joined at the block's end: one chain of dependent vpdpbusd
  // (8 a block of 32) held a decode row to their latency (AMD EPYC Zen 4: 8% of its time).
  // Integer sums: the order changes nothing.
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i sum[R][4];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) sum[r][j] = _mm512_setzero_si512();
    const uint8_t* q = packed + g * s.groupCodeBytes() + b * s.blockCodeBytes();
    const int8_t* a = op.q + row * op.kp + b * s.block;
    if (s.bits == 4) { // 16 k a pass (block >= 16): two code vectors, their four nibble halves
      for (int64_t k = 0; k < s.block; k += 16, q += 128) {
        const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64);
        const __m512i lo0 = _mm512_and_si512(v0, nibble),
                      hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), nibble);
        const __m512i lo1 = _mm512_and_si512(v1, nibble),
                      hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), nibble);
        for (int r = 0; r < R; ++r) {
          const int8_t* x = a + r * op.kp + k;
          dot(sum[r][0], lo0, x);
          dot(sum[r][1], hi0, x + 4);
          dot(sum[r][2], lo1, x + 8);
          dot(sum[r][3], hi1, x + 12);
        }
      }
    } else { // 16 k a pass: four code vectors
      for (int64_t k = 0; k < s.block; k += 16, q += 256)
        for (int j = 0; j < 4; ++j) {
          const __m512i v = _mm512_loadu_si512(q + 64 * j);
          for (int r = 0; r < R; ++r) dot(sum[r][j], v, a + r * op.kp + k + 4 * j);
        }
    }
    const __m512 sc = _mm512_loadu_ps(scales + b * 16);
    const __m512i zp =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zeros + b * 16)));
    for (int r = 0; r < R; ++r) {
      const int64_t at = (row + r) * blocks + b;
      const __m512i total = _mm512_add_epi32(_mm512_add_epi32(sum[r][0], sum[r][1]),
                                             _mm512_add_epi32(sum[r][2], sum[r][3]));
      const __m512i v =
          _mm512_sub_epi32(total, _mm512_mullo_epi32(zp, _mm512_set1_epi32(op.sum[at])));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v),
                               _mm512_mul_ps(sc, _mm512_set1_ps(op.scale[at])), acc[r]);
    }
  }
  const int64_t valid = std::min<int64_t>(16, s.n - g * 16);
  const auto mask = static_cast<__mmask16>((1u << valid) - 1);
  for (int r = 0; r < R && row + r < m; ++r)
    _mm512_mask_storeu_ps(y + (row + r) * s.n + g * 16, mask, acc[r]);
}

using GroupFn = detail::GroupFn<Q8Operands>;

template <int R> GroupFn groupFn(WeightOnlyQ8Isa isa) {
  return isa == WeightOnlyQ8Isa::Vnni ? groupVnni<R> : groupScalar<R>;
}

} // namespace

bool weightOnlyQ8Supports(const WeightOnlyShape& s, std::span<const float> zeroPoints) {
  if (!s.valid() || s.block > 256) return false;
  const float top = static_cast<float>((1 << s.bits) - 1);
  for (float z : zeroPoints)
    if (!(z >= 0 && z <= top && z == std::nearbyint(z))) return false;
  return true;
}

std::vector<uint8_t> packWeightOnlyQ8(const WeightOnlyShape& s, std::span<const uint8_t> codes,
                                      std::span<const float> scales,
                                      std::span<const float> zeroPoints) {
  const int64_t blocks = s.blocks(), groups = s.groups();
  std::vector<uint8_t> out(static_cast<size_t>(s.packedBytesQ8()), 0);
  auto* sc = reinterpret_cast<float*>(out.data() + s.codeBytes());
  uint8_t* zp = out.data() + s.codeBytes() + groups * blocks * 16 * 4;
  const int64_t kPerStep = s.bits == 4 ? 8 : 4;
  for (int64_t col = 0; col < s.n; ++col) {
    const int64_t g = col / 16, c = col % 16;
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* q = out.data() + g * s.groupCodeBytes() + b * s.blockCodeBytes();
      for (int64_t j = 0; j < s.block && b * s.block + j < s.k; ++j) {
        const uint8_t code = codes[static_cast<size_t>(col * s.k + b * s.block + j)];
        const int64_t t = j / kPerStep, within = j % kPerStep;
        uint8_t& byte = q[t * 64 + c * 4 + within % 4];
        if (s.bits == 8)
          byte = code;
        else
          byte = static_cast<uint8_t>(byte | ((code & 15) << (within < 4 ? 0 : 4)));
      }
      sc[(g * blocks + b) * 16 + c] = scales[static_cast<size_t>(col * blocks + b)];
      zp[(g * blocks + b) * 16 + c] =
          static_cast<uint8_t>(zeroPoints[static_cast<size_t>(col * blocks + b)]);
    }
  }
  return out;
}

namespace {

// Rows [0, rows) of A quantized per block (rows past m and k past K zeros): the step amax / 127,
// codes nearbyint(a / step) within +-127, and each block's sum of codes.
void quantizeRows(const float* a, int64_t m, int64_t rows, const WeightOnlyShape& s, int8_t* q,
                  float* scale, int32_t* sum) {
  const int64_t blocks = s.blocks(), kp = blocks * s.block;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t from = b * s.block, to = r < m ? std::min(s.k, from + s.block) : from;
      float amax = 0.f;
      for (int64_t k = from; k < to; ++k) amax = std::max(amax, std::fabs(a[r * s.k + k]));
      const float step = amax / 127.f;
      int32_t total = 0;
      for (int64_t k = from; k < from + s.block; ++k) {
        int8_t v = 0;
        const float x = k < to && step > 0.f ? a[r * s.k + k] / step : 0.f;
        if (!std::isnan(x)) // a NaN activation (or an infinite block: inf / inf) is code 0
          v = static_cast<int8_t>(std::clamp(std::nearbyint(x), -127.f, 127.f));
        q[r * kp + k] = v;
        total += v;
      }
      scale[r * blocks + b] = step;
      sum[r * blocks + b] = total;
    }
}

// quantizeRows 16 values a step, its arithmetic (a division, a round to nearest even) exactly.
__attribute__((target("avx512f,avx512bw"))) void
quantizeRowsAvx512(const float* a, int64_t m, int64_t rows, const WeightOnlyShape& s, int8_t* q,
                   float* scale, int32_t* sum) {
  const int64_t blocks = s.blocks(), kp = blocks * s.block;
  const __m512 limit = _mm512_set1_ps(127.f), low = _mm512_set1_ps(-127.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t from = b * s.block, to = r < m ? std::min(s.k, from + s.block) : from;
      auto valid = [&](int64_t k) {
        const int64_t n = std::clamp<int64_t>(to - k, 0, 16);
        return static_cast<__mmask16>((1u << n) - 1);
      };
      __m512 amax = _mm512_setzero_ps();
      for (int64_t k = from; k < to; k += 16)
        amax = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(valid(k), a + r * s.k + k)),
                             amax); // a NaN lane keeps amax, as std::max(amax, NaN) does
      const float step = _mm512_reduce_max_ps(amax) / 127.f;
      __m512i total = _mm512_setzero_si512();
      for (int64_t k = from; k < from + s.block; k += 16) {
        __m512i v = _mm512_setzero_si512();
        if (k < to && step > 0.f) {
          const __m512 x =
              _mm512_div_ps(_mm512_maskz_loadu_ps(valid(k), a + r * s.k + k), _mm512_set1_ps(step));
          const __m512 rounded =
              _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          v = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(rounded, low), limit));
          v = _mm512_mask_mov_epi32(v, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                                    _mm512_setzero_si512());
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * kp + k), _mm512_cvtepi32_epi8(v));
        total = _mm512_add_epi32(total, v);
      }
      scale[r * blocks + b] = step;
      sum[r * blocks + b] = _mm512_reduce_add_epi32(total);
    }
}

} // namespace

void runWeightOnlyMatmulQ8(const float* a, const uint8_t* packed, float* y, int64_t m,
                           const WeightOnlyShape& s, int threads, WeightOnlyQ8Isa isa) {
  if (m <= 0) return;
  static const bool vnni = __builtin_cpu_supports("avx512vnni") != 0;
  if (isa == WeightOnlyQ8Isa::Auto) isa = vnni ? WeightOnlyQ8Isa::Vnni : WeightOnlyQ8Isa::Scalar;
  const int64_t blocks = s.blocks(), kp = blocks * s.block;
  const int64_t rows = (m + kRows - 1) / kRows * kRows;
  // The quantized rows (zeros past k and past m), their scales and sums, in this thread's
  // scratch: no allocation per run once it has grown.
  const int64_t bytes = rows * kp + rows * blocks * 8 + 64;
  auto* base = static_cast<uint8_t*>(tunec_scratch(3, bytes));
  auto* scale = reinterpret_cast<float*>(base);
  auto* sum = reinterpret_cast<int32_t*>(base + rows * blocks * 4);
  auto* q = reinterpret_cast<int8_t*>(base + rows * blocks * 8);
  if (isa == WeightOnlyQ8Isa::Vnni)
    quantizeRowsAvx512(a, m, rows, s, q, scale, sum);
  else
    quantizeRows(a, m, rows, s, q, scale, sum);
  const Q8Operands op{q, scale, sum, kp};
  const GroupFn tail[kRows] = {nullptr, groupFn<1>(isa), groupFn<2>(isa), groupFn<3>(isa)};
  detail::forEachGroup<Q8Operands, kRows>(op, packed, s, y, m, threads, groupFn<kRows>(isa), tail);
}

} // namespace tunec::rt
