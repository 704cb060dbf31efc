// Packing of A panels, B panels and zero-padding of NHWC activations.
#include "runtime/packing.h"

#include "support/dtype.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>
#include <vector>

extern "C" void tunec_pack_a_f32(const float* a, int64_t lda, int32_t transposed, int64_t rows,
                                 int64_t cols, int64_t mr, float* dst) {
  for (int64_t p = 0; p * mr < rows; ++p) {
    float* panel = dst + p * mr * cols;
    int64_t r0 = p * mr, valid = std::min(mr, rows - r0);
    if (transposed) {
      for (int64_t k = 0; k < cols; ++k) {
        const float* src = a + k * lda + r0;
        float* out = panel + k * mr;
        for (int64_t i = 0; i < valid; ++i) out[i] = src[i];
        for (int64_t i = valid; i < mr; ++i) out[i] = 0.f;
      }
      continue;
    }
    // Rows are read as mr sequential streams and the panel is written contiguously; blocks of 16
    // columns keep the mr source lines in L1 while they are transposed.
    const float* rows[64];
    for (int64_t i = 0; i < mr && i < 64; ++i) rows[i] = i < valid ? a + (r0 + i) * lda : nullptr;
    for (int64_t k0 = 0; k0 < cols; k0 += 16) {
      int64_t k1 = std::min(cols, k0 + 16);
      for (int64_t i = 0; i < mr; ++i) {
        float* out = panel + i;
        if (!rows[i]) {
          for (int64_t k = k0; k < k1; ++k) out[k * mr] = 0.f;
          continue;
        }
        const float* src = rows[i];
        for (int64_t k = k0; k < k1; ++k) out[k * mr] = src[k];
      }
    }
  }
}

namespace {

// dst[r * ldd + i] = src[i * lds + r] for an 8 x 8 block (AVX2 shuffles, 24 for 64 elements).
__attribute__((target("avx2"))) void transpose8x8(const float* src, int64_t lds, float* dst,
                                                  int64_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// A transposed B (N x K as stored) into one panel: the 8 x 8 blocks with AVX2 where the CPU
// has it, the rest element by element. (Attention's K^T, 64 x 128 per head: the whole Q K^T
// kernel of 12 heads went from 0.166 to 0.123 ms, as fast as with a dense B.)
void packTransposedPanel(const float* b, int64_t ldb, int64_t k, int64_t c0, int64_t valid,
                         int64_t nr, float* panel) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  int64_t jBlocks = avx2 ? valid / 8 * 8 : 0, kBlocks = avx2 ? k / 8 * 8 : 0;
  for (int64_t j = 0; j < jBlocks; j += 8)
    for (int64_t kk = 0; kk < kBlocks; kk += 8)
      transpose8x8(b + (c0 + j) * ldb + kk, ldb, panel + kk * nr + j, nr);
  for (int64_t kk = 0; kk < k; ++kk) {
    float* out = panel + kk * nr;
    for (int64_t j = kk < kBlocks ? jBlocks : 0; j < valid; ++j) out[j] = b[(c0 + j) * ldb + kk];
    for (int64_t j = valid; j < nr; ++j) out[j] = 0.f;
  }
}

} // namespace

extern "C" void tunec_pack_b_f32(const float* b, int64_t ldb, int32_t transposed, int64_t k,
                                 int64_t n, int64_t nr, float* dst) {
  if (transposed) {
    for (int64_t c0 = 0; c0 < n; c0 += nr)
      packTransposedPanel(b, ldb, k, c0, std::min(nr, n - c0), nr, dst + c0 * k);
    return;
  }
  // Each row of B read once, front to back, into every panel (one stream through memory, not
  // one pass per panel); whole panel rows in fixed 8-float pieces (vector moves, not a memcpy
  // call per row), the last panel's tail zero-padded.
  const int64_t whole = nr % 8 == 0 ? n / nr * nr : 0; // columns in whole panels so copied
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* row = b + kk * ldb;
    for (int64_t c0 = 0; c0 < whole; c0 += nr)
      for (int64_t j = 0; j < nr; j += 8)
        std::memcpy(dst + c0 * k + kk * nr + j, row + c0 + j, 8 * sizeof(float));
    for (int64_t c0 = whole; c0 < n; c0 += nr) {
      float* out = dst + c0 * k + kk * nr;
      int64_t valid = std::min(nr, n - c0);
      std::memcpy(out, row + c0, static_cast<size_t>(valid) * sizeof(float));
      for (int64_t j = valid; j < nr; ++j) out[j] = 0.f;
    }
  }
}

namespace {

// B in k-pair panels (tunec_pack_b_bf16's layout); `bits(x)` is the bf16 of a source element.
// Row pairs are read front to back, each into every panel.
template <typename T, typename Bits>
void packPairPanels(const T* b, int64_t ldb, bool transposed, int64_t k, int64_t n, int64_t nr,
                    uint16_t* dst, Bits bits) {
  const int64_t kp = (k + 1) / 2 * 2, panels = (n + nr - 1) / nr;
  auto at = [&](int64_t kk, int64_t j) -> uint16_t {
    if (kk >= k || j >= n) return 0;
    return bits(transposed ? b[j * ldb + kk] : b[kk * ldb + j]);
  };
  for (int64_t kk = 0; kk < kp; kk += 2)
    for (int64_t p = 0; p < panels; ++p) {
      uint16_t* out = dst + p * kp * nr + kk * nr;
      for (int64_t j = 0; j < nr; ++j) {
        out[2 * j] = at(kk, p * nr + j);
        out[2 * j + 1] = at(kk + 1, p * nr + j);
      }
    }
}

// One row of n floats to bf16 (nearest even, NaN kept quiet): 16 at a time with AVX512-BF16's
// vcvtneps2bf16 where the CPU has it, the rest as floatToBf16 does (the same bits, except that
// the instruction treats subnormal inputs as zero).
__attribute__((target("avx512f,avx512bf16"))) void rowToBf16Avx512(const float* src, int64_t n,
                                                                   uint16_t* dst) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j))));
  for (; j < n; ++j) dst[j] = tunec::floatToBf16(src[j]);
}

void rowToBf16(const float* src, int64_t n, uint16_t* dst) {
  static const bool bf16 = __builtin_cpu_supports("avx512bf16");
  if (bf16) return rowToBf16Avx512(src, n, dst);
  for (int64_t j = 0; j < n; ++j) dst[j] = tunec::floatToBf16(src[j]);
}

} // namespace

extern "C" void tunec_pack_a_f32_to_bf16(const float* a, int64_t lda, int32_t transposed,
                                         int64_t rows, int64_t cols, uint16_t* dst) {
  const int64_t cp = (cols + 1) / 2 * 2;
  for (int64_t i = 0; i < rows; ++i) {
    uint16_t* out = dst + i * cp;
    if (transposed)
      for (int64_t k = 0; k < cols; ++k) out[k] = tunec::floatToBf16(a[k * lda + i]);
    else
      rowToBf16(a + i * lda, cols, out);
    if (cp != cols) out[cols] = 0;
  }
}

extern "C" void tunec_pack_a_bf16_tiles(const void* a, int32_t srcIsBf16, int64_t lda,
                                        int32_t transposed, int64_t rows, int64_t cols,
                                        int64_t kPad, uint16_t* dst) {
  const auto* f = static_cast<const float*>(a);
  const auto* h = static_cast<const uint16_t*>(a);
  const int64_t steps = kPad / 32;
  for (int64_t i = 0; i < rows; ++i) {
    // Row i % 16 of the tiles of row block i / 16: 32 values (64 bytes) per k step, written in
    // place (no row buffer: the attention and the matmuls call this per block), zeros past k.
    uint16_t* block = dst + (i / 16) * steps * 512 + (i % 16) * 32;
    for (int64_t s = 0; s < steps; ++s) {
      uint16_t* out = block + s * 512;
      const int64_t k0 = s * 32, valid = std::clamp<int64_t>(cols - k0, 0, 32);
      if (srcIsBf16 && transposed)
        for (int64_t k = 0; k < valid; ++k) out[k] = h[(k0 + k) * lda + i];
      else if (srcIsBf16)
        std::memcpy(out, h + i * lda + k0, static_cast<size_t>(valid) * sizeof(uint16_t));
      else if (transposed)
        for (int64_t k = 0; k < valid; ++k) out[k] = tunec::floatToBf16(f[(k0 + k) * lda + i]);
      else
        rowToBf16(f + i * lda + k0, valid, out);
      std::memset(out + valid, 0, static_cast<size_t>(32 - valid) * sizeof(uint16_t));
    }
  }
  // The rows after the last up to a whole tile are zeros: the kernels load all 16 rows.
  for (int64_t i = rows; i % 16; ++i) {
    uint16_t* block = dst + (i / 16) * steps * 512 + (i % 16) * 32;
    for (int64_t s = 0; s < steps; ++s) std::memset(block + s * 512, 0, 32 * sizeof(uint16_t));
  }
}

extern "C" void tunec_pack_a_u8_tiles(const uint8_t* a, int64_t lda, int64_t rows, int64_t cols,
                                      int64_t kPad, uint8_t* dst) {
  const int64_t steps = kPad / 64;
  for (int64_t i = 0; i < (rows + 15) / 16 * 16; ++i) {
    // Row i % 16 of the tiles of row block i / 16: 64 values per k step.
    uint8_t* block = dst + (i / 16) * steps * 1024 + (i % 16) * 64;
    for (int64_t s = 0; s < steps; ++s) {
      int64_t k0 = s * 64, valid = i < rows ? std::clamp<int64_t>(cols - k0, 0, 64) : 0;
      if (valid) std::memcpy(block + s * 1024, a + i * lda + k0, static_cast<size_t>(valid));
      std::memset(block + s * 1024 + valid, 0, static_cast<size_t>(64 - valid));
    }
  }
}

namespace {

// Where padded row y of image b is stored with its rows in `phases` planes (row y in plane
// y % phases at y / phases): the row index in units of wp pixels.
int64_t phasedRow(int64_t b, int64_t y, int64_t hp, int64_t phases) {
  const int64_t planeRows = (hp + phases - 1) / phases;
  return (b * phases + y % phases) * planeRows + y / phases;
}

} // namespace

namespace {

// copy(source pixel, copy pixel) for the pixels (y * sh, x * sw) of each image, in order.
template <typename Copy>
void forEachSubsampledPixel(int64_t n, int64_t h, int64_t w, int64_t sh, int64_t sw, Copy copy) {
  const int64_t oh = (h - 1) / sh + 1, ow = (w - 1) / sw + 1;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x) copy((b * h + y * sh) * w + x * sw, (b * oh + y) * ow + x);
}

} // namespace

extern "C" void tunec_subsample_nhwc_f32_to_bf16(const float* src, int64_t srcLd, int64_t n,
                                                 int64_t h, int64_t w, int64_t c, int64_t sh,
                                                 int64_t sw, uint16_t* dst) {
  forEachSubsampledPixel(n, h, w, sh, sw, [&](int64_t from, int64_t to) {
    rowToBf16(src + from * srcLd, c, dst + to * c);
  });
}

extern "C" void tunec_subsample_nhwc_u8(const uint8_t* src, int64_t srcLd, int64_t n, int64_t h,
                                        int64_t w, int64_t c, int64_t sh, int64_t sw,
                                        uint8_t* dst) {
  forEachSubsampledPixel(n, h, w, sh, sw, [&](int64_t from, int64_t to) {
    std::memcpy(dst + to * c, src + from * srcLd, static_cast<size_t>(c));
  });
}

extern "C" void tunec_pad_nhwc_f32_to_bf16(const float* src, int64_t srcLd, int64_t n, int64_t h,
                                           int64_t w, int64_t c, int64_t pt, int64_t pl, int64_t hp,
                                           int64_t wp, int64_t phases, uint16_t* dst) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < hp; ++y) {
      uint16_t* row = dst + phasedRow(b, y, hp, phases) * wp * c;
      int64_t sy = y - pt;
      if (sy < 0 || sy >= h) {
        std::memset(row, 0, static_cast<size_t>(wp * c) * sizeof(uint16_t));
        continue;
      }
      std::memset(row, 0, static_cast<size_t>(pl * c) * sizeof(uint16_t));
      const float* in = src + (b * h + sy) * w * srcLd;
      if (srcLd == c) {
        rowToBf16(in, w * c, row + pl * c);
      } else {
        for (int64_t x = 0; x < w; ++x) rowToBf16(in + x * srcLd, c, row + (pl + x) * c);
      }
      int64_t right = wp - pl - w;
      if (right > 0)
        std::memset(row + (pl + w) * c, 0, static_cast<size_t>(right * c) * sizeof(uint16_t));
    }
}

extern "C" void tunec_pack_b_bf16(const uint16_t* b, int64_t ldb, int32_t transposed, int64_t k,
                                  int64_t n, int64_t nr, uint16_t* dst) {
  packPairPanels(b, ldb, transposed != 0, k, n, nr, dst, [](uint16_t x) { return x; });
}

namespace {

// tunec_pack_b_f32_to_bf16 with AVX512-BF16 (attention packs K and V of every head at run time):
// an untransposed B two rows at a time, 16 columns of k-pairs per store (the row pair rounded by
// vcvtneps2bf16 and interleaved as 32-bit pairs); a transposed B (K^T: a column of B is a row of
// K, its k-pairs adjacent) a row at a time, rounded in one pass, then its pairs put in place.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void
packPairPanelsAvx512(const float* b, int64_t ldb, bool transposed, int64_t k, int64_t n, int64_t nr,
                     uint16_t* dst) {
  const int64_t kp = (k + 1) / 2 * 2, panels = (n + nr - 1) / nr;
  auto* out32 = reinterpret_cast<uint32_t*>(dst);
  if (transposed) {
    std::vector<uint16_t> row(static_cast<size_t>(kp), 0);
    const auto* pairs = reinterpret_cast<const uint32_t*>(row.data());
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t jl = 0; jl < nr; ++jl) {
        int64_t j = p * nr + jl;
        uint32_t* col = out32 + (p * kp * nr) / 2 + jl;
        if (j >= n) {
          for (int64_t q = 0; q < kp / 2; ++q) col[q * nr] = 0;
          continue;
        }
        rowToBf16Avx512(b + j * ldb, k, row.data());
        for (int64_t q = 0; q < kp / 2; ++q) col[q * nr] = pairs[q];
      }
    return;
  }
  for (int64_t kk = 0; kk < kp; kk += 2) {
    const float* r0 = b + kk * ldb;
    const float* r1 = kk + 1 < k ? b + (kk + 1) * ldb : nullptr;
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t j = 0; j < nr; j += 16) {
        int64_t c = p * nr + j, valid = std::clamp<int64_t>(n - c, 0, 16);
        auto mask = static_cast<__mmask16>((1u << valid) - 1);
        __m512i lo = _mm512_maskz_cvtepu16_epi32(
            0xffff,
            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, r0 + c))));
        __m512i hi =
            r1 ? _mm512_maskz_cvtepu16_epi32(0xffff, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(
                                                         _mm512_maskz_loadu_ps(mask, r1 + c))))
               : _mm512_setzero_si512();
        _mm512_storeu_si512(dst + p * kp * nr + kk * nr + 2 * j,
                            _mm512_or_si512(lo, _mm512_maskz_slli_epi32(0xffff, hi, 16)));
      }
  }
}

} // namespace

extern "C" void tunec_pack_b_f32_to_bf16(const float* b, int64_t ldb, int32_t transposed, int64_t k,
                                         int64_t n, int64_t nr, uint16_t* dst) {
  static const bool fast =
      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  if (fast && nr % 16 == 0) return packPairPanelsAvx512(b, ldb, transposed != 0, k, n, nr, dst);
  packPairPanels(b, ldb, transposed != 0, k, n, nr, dst,
                 [](float x) { return tunec::floatToBf16(x); });
}

namespace {

// `pack` (tunec_pack_b_f32_to_bf16 or tunec_pack_b_bf16) panel by panel into slots of kPad / 2
// pair rows, the rows past k zeroed.
template <typename T, typename Pack>
void packPairPanelSlots(const T* b, int64_t ldb, int32_t transposed, int64_t k, int64_t n,
                        int64_t nr, int64_t kPad, uint16_t* dst, Pack pack) {
  const int64_t kp = (k + 1) / 2 * 2, slot = kPad * nr;
  if (kPad == kp) return pack(b, ldb, transposed, k, n, nr, dst);
  for (int64_t p = 0; p * nr < n; ++p) {
    uint16_t* panel = dst + p * slot;
    pack(b + p * nr * (transposed ? ldb : 1), ldb, transposed, k, std::min(nr, n - p * nr), nr,
         panel);
    std::memset(panel + kp * nr, 0, static_cast<size_t>(slot - kp * nr) * sizeof(uint16_t));
  }
}

} // namespace

extern "C" void tunec_pack_b_f32_to_bf16_slots(const float* b, int64_t ldb, int32_t transposed,
                                               int64_t k, int64_t n, int64_t nr, int64_t kPad,
                                               uint16_t* dst) {
  packPairPanelSlots(b, ldb, transposed, k, n, nr, kPad, dst, tunec_pack_b_f32_to_bf16);
}

extern "C" void tunec_pack_b_bf16_slots(const uint16_t* b, int64_t ldb, int32_t transposed,
                                        int64_t k, int64_t n, int64_t nr, int64_t kPad,
                                        uint16_t* dst) {
  packPairPanelSlots(b, ldb, transposed, k, n, nr, kPad, dst, tunec_pack_b_bf16);
}

extern "C" void tunec_pad_nchw_to_nhwc_f32(const float* src, int64_t n, int64_t h, int64_t w,
                                           int64_t c, int64_t pt, int64_t pl, int64_t hp,
                                           int64_t wp, float* dst) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < hp; ++y) {
      float* row = dst + ((b * hp + y) * wp) * c;
      int64_t sy = y - pt;
      std::memset(row, 0, static_cast<size_t>(wp * c) * sizeof(float));
      if (sy < 0 || sy >= h) continue;
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* plane = src + ((b * c + ch) * h + sy) * w;
        for (int64_t x = 0; x < w; ++x) row[(pl + x) * c + ch] = plane[x];
      }
    }
}

extern "C" void tunec_pad_to_nhwc_u8(const uint8_t* src, int64_t nchw, int64_t n, int64_t h,
                                     int64_t w, int64_t c, int64_t srcLd, int64_t cs, int64_t pt,
                                     int64_t pl, int64_t hp, int64_t wp, int64_t value,
                                     int64_t phases, uint8_t* dst) {
  const auto fill = static_cast<int>(value);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < hp; ++y) {
      uint8_t* row = dst + phasedRow(b, y, hp, phases) * wp * cs;
      int64_t sy = y - pt;
      if (sy < 0 || sy >= h || nchw || cs != c || srcLd != c) {
        std::memset(row, fill, static_cast<size_t>(wp * cs));
        if (sy < 0 || sy >= h) continue;
      }
      if (nchw && cs == 4) { // an image's channels and the fill as one word per pixel
        uint32_t base = 0;   // the fill in the bytes past c
        for (int64_t k = c; k < 4; ++k) base |= static_cast<uint32_t>(fill) << (8 * k);
        const uint8_t* plane = src + (b * c * h + sy) * w;
        for (int64_t x0 = 0; x0 < w; x0 += 64) {
          const int64_t len = std::min<int64_t>(64, w - x0);
          uint32_t words[64];
          for (int64_t x = 0; x < len; ++x) words[x] = base;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t x = 0; x < len; ++x)
              words[x] |= uint32_t{plane[ch * h * w + x0 + x]} << (8 * ch);
          std::memcpy(row + (pl + x0) * cs, words, static_cast<size_t>(len * cs));
        }
      } else if (nchw) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const uint8_t* plane = src + ((b * c + ch) * h + sy) * w;
          for (int64_t x = 0; x < w; ++x) row[(pl + x) * cs + ch] = plane[x];
        }
      } else if (cs != c || srcLd != c) {
        const uint8_t* line = src + ((b * h + sy) * w) * srcLd;
        for (int64_t x = 0; x < w; ++x)
          std::memcpy(row + (pl + x) * cs, line + x * srcLd, static_cast<size_t>(c));
      } else {
        std::memset(row, fill, static_cast<size_t>(pl * c));
        std::memcpy(row + pl * c, src + ((b * h + sy) * w) * c, static_cast<size_t>(w * c));
        if (int64_t right = wp - pl - w; right > 0)
          std::memset(row + (pl + w) * c, fill, static_cast<size_t>(right * c));
      }
    }
}

extern "C" void tunec_pad_nhwc_f32(const float* src, int64_t n, int64_t h, int64_t w, int64_t c,
                                   int64_t pt, int64_t pl, int64_t hp, int64_t wp, float* dst) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < hp; ++y) {
      float* row = dst + ((b * hp + y) * wp) * c;
      int64_t sy = y - pt;
      if (sy < 0 || sy >= h) {
        std::memset(row, 0, static_cast<size_t>(wp * c) * sizeof(float));
        continue;
      }
      std::memset(row, 0, static_cast<size_t>(pl * c) * sizeof(float));
      std::memcpy(row + pl * c, src + ((b * h + sy) * w) * c,
                  static_cast<size_t>(w * c) * sizeof(float));
      int64_t right = wp - pl - w;
      if (right > 0)
        std::memset(row + (pl + w) * c, 0, static_cast<size_t>(right * c) * sizeof(float));
    }
}
