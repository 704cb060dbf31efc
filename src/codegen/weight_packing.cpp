// The packer family of compile-time weights: f32, a matmul's B and a convolution's weights in
// bf16 k-pairs, and both in i8 k-quads.
#include "codegen/weight_packing.h"

#include "runtime/packing.h"
#include "support/error.h"

#include <cmath>
#include <cstdlib>
#include <vector>

namespace tunec::codegen {

namespace {

// Zero-initialized, 64-byte aligned storage for `elements` of `dtype` in `layout`.
PackedWeights allocate(int64_t elements, DType dtype, WeightLayout layout) {
  PackedWeights p;
  p.dtype = dtype;
  p.layout = layout;
  p.bytes = static_cast<size_t>(elements) * dtypeSize(dtype);
  size_t rounded = (std::max<size_t>(p.bytes, 1) + 63) / 64 * 64;
  p.data = std::shared_ptr<std::byte>(static_cast<std::byte*>(std::aligned_alloc(64, rounded)),
                                      [](std::byte* q) { std::free(q); });
  std::fill(p.data.get(), p.data.get() + rounded, std::byte{0});
  return p;
}

float* floatsOf(PackedWeights& p) {
  TUNEC_ASSERT(p.dtype == DType::F32, "an f32 packer on " << dtypeName(p.dtype) << " weights");
  return reinterpret_cast<float*>(p.data.get());
}

} // namespace

Status checkAvx2Int8Weights(const float* weights, int64_t count, const char* templ) {
  for (int64_t i = 0; i < count; ++i)
    if (std::abs(weights[i]) > kAvx2Int8WeightLimit)
      return makeError(
          templ, ": the AVX2 int8 kernel needs 7-bit weights (|w| <= ", kAvx2Int8WeightLimit,
          ", so vpmaddubsw's pair sums cannot saturate); weight ", i, " is ", weights[i],
          ": requantize the weights to 7 bits (tunec's graph lowering halves them) "
          "or compile for a target with AVX512-VNNI or AMX");
  return {};
}

int64_t matmulPanelElements(const MatmulWorkload& w, const MatmulConfig& c) {
  const int64_t group = kGroup(c.isa, w.types); // whole k-pairs, or AMX tile rows
  return (w.k + group - 1) / group * group * c.nr;
}

int64_t matmulPackedBElements(const MatmulWorkload& w, const MatmulConfig& c) {
  return (w.n + c.nr - 1) / c.nr * matmulPanelElements(w, c);
}

PackedWeights packMatmulB(const MatmulWorkload& w, const MatmulConfig& c, const float* b) {
  int64_t batches = w.broadcastB ? 1 : w.batch, per = matmulPackedBElements(w, c);
  if (w.types.wei == DType::BF16) { // k-pair panels of bf16 (vdpbf16ps)
    PackedWeights packed = allocate(per * batches, DType::BF16, WeightLayout::MatmulPairPanels);
    auto* dst = reinterpret_cast<uint16_t*>(packed.data.get());
    // Panels of whole k-pairs, each (AMX) in its slot of k padded to a tile row.
    for (int64_t i = 0; i < batches; ++i)
      tunec_pack_b_f32_to_bf16_slots(b + i * w.k * w.n, w.transB ? w.k : w.n, w.transB, w.k, w.n,
                                     c.nr, matmulPanelElements(w, c) / c.nr, dst + i * per);
    return packed;
  }
  if (w.types.wei == DType::I8) { // k-quad panels of i8 (tdpbusd), k padded to whole tile rows
    PackedWeights packed = allocate(per * batches, DType::I8, WeightLayout::MatmulQuadPanels);
    auto* dst = reinterpret_cast<int8_t*>(packed.data.get());
    const int64_t slot = matmulPanelElements(w, c), ldb = w.transB ? w.k : w.n;
    for (int64_t i = 0; i < batches; ++i)
      for (int64_t col = 0; col < w.n; ++col)
        for (int64_t kk = 0; kk < w.k; ++kk) {
          float v = b[i * w.k * w.n + (w.transB ? col * ldb + kk : kk * ldb + col)];
          TUNEC_ASSERT(v == std::nearbyint(v) && v >= -128 && v <= 127,
                       "i8 weight " << v << " is not an integer in [-128, 127]");
          int64_t panel = col / c.nr, j = col % c.nr;
          dst[i * per + panel * slot + (kk / 4) * c.nr * 4 + j * 4 + kk % 4] =
              static_cast<int8_t>(v);
        }
    return packed;
  }
  PackedWeights packed = allocate(per * batches, w.types.wei, WeightLayout::MatmulPanels);
  float* dst = floatsOf(packed);
  for (int64_t i = 0; i < batches; ++i)
    tunec_pack_b_f32(b + i * w.k * w.n, w.transB ? w.k : w.n, w.transB, w.k, w.n, c.nr,
                     dst + i * per);
  return packed;
}

// A convolution's weights in k-group panels, [group][panel][kh][kw][ic/g][ocBlock][g] (`g`
// input channels per group of the packed row, g dividing the channels per group), each weight
// converted by `to`, zeros past each group's output channels.
template <typename T, typename Convert>
void packConv2dGroups(const Conv2dWorkload& w, const Conv2dConfig& c, int64_t g, const float* src,
                      T* dst, Convert to) {
  // The kernel's channels (icKernelPerGroup) past the model's read zero weights.
  const int64_t ocg = w.ocPerGroup(), icg = w.icPerGroup(), ick = w.icKernelPerGroup(c.isa);
  const int64_t perGroup = (ocg + c.ocBlock - 1) / c.ocBlock;
  for (int64_t gr = 0; gr < w.groups; ++gr)
    for (int64_t p = 0; p < perGroup; ++p)
      for (int64_t kh = 0; kh < w.kh; ++kh)
        for (int64_t kw = 0; kw < w.kw; ++kw)
          for (int64_t ic = 0; ic < ick; ic += g)
            for (int64_t j = 0; j < c.ocBlock; ++j)
              for (int64_t q = 0; q < g; ++q) {
                int64_t local = p * c.ocBlock + j, oc = gr * ocg + local;
                *dst++ = local < ocg && ic + q < icg
                             ? to(src[((oc * icg + ic + q) * w.kh + kh) * w.kw + kw])
                             : T{};
              }
}

PackedWeights packConv2dWeights(const Conv2dWorkload& w, const Conv2dConfig& c, const float* src) {
  int64_t ocg = w.ocPerGroup(), icg = w.icPerGroup();
  int64_t perGroup = (ocg + c.ocBlock - 1) / c.ocBlock;
  int64_t count = w.groups * perGroup * w.kh * w.kw * w.icKernelPerGroup(c.isa) * c.ocBlock;
  if (w.types.wei == DType::BF16) { // input-channel pairs (icg is even), bf16
    PackedWeights packed = allocate(count, DType::BF16, WeightLayout::Conv2dPairPanels);
    packConv2dGroups(w, c, 2, src, reinterpret_cast<uint16_t*>(packed.data.get()), floatToBf16);
    return packed;
  }
  if (w.types.wei == DType::I8) {
    // Input-channel quads (icg is a multiple of 4), each weight an integer in [-128, 127] (the
    // compiler's s8 constants as floats).
    PackedWeights packed = allocate(count, DType::I8, WeightLayout::Conv2dQuadPanels);
    packConv2dGroups(w, c, 4, src, reinterpret_cast<int8_t*>(packed.data.get()), [](float v) {
      TUNEC_ASSERT(v == std::nearbyint(v) && v >= -128 && v <= 127,
                   "i8 weight " << v << " is not an integer in [-128, 127]");
      return static_cast<int8_t>(v);
    });
    return packed;
  }
  PackedWeights packed = allocate(count, w.types.wei, WeightLayout::Conv2dPanels);
  float* dst = floatsOf(packed);
  for (int64_t g = 0; g < w.groups; ++g)
    for (int64_t p = 0; p < perGroup; ++p)
      for (int64_t kh = 0; kh < w.kh; ++kh)
        for (int64_t kw = 0; kw < w.kw; ++kw)
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t j = 0; j < c.ocBlock; ++j) {
              int64_t local = p * c.ocBlock + j, oc = g * ocg + local;
              *dst++ = local < ocg ? src[((oc * icg + ic) * w.kh + kh) * w.kw + kw] : 0.f;
            }
  return packed;
}

PackedWeights packDepthwiseWeights(const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                   int64_t cPad, const float* src) {
  int64_t taps = w.kh * w.kw;
  if (depthwiseSumsInQuads(w, c)) {
    // [row quad][kw][channel][4]: one i32 lane per channel holds taps (4q .. 4q + 3, kw), zero
    // past kh and c, each an integer in [-128, 127] (the compiler's s8 constants as floats).
    int64_t quads = depthwiseRowQuads(w);
    PackedWeights packed =
        allocate(quads * w.kw * cPad * 4, DType::I8, WeightLayout::DepthwiseQuadTaps);
    auto* dst = reinterpret_cast<int8_t*>(packed.data.get());
    for (int64_t q = 0; q < quads; ++q)
      for (int64_t kw = 0; kw < w.kw; ++kw)
        for (int64_t ch = 0; ch < w.c; ++ch)
          for (int64_t r = 0; r < 4 && 4 * q + r < w.kh; ++r) {
            float v = src[ch * taps + (4 * q + r) * w.kw + kw];
            TUNEC_ASSERT(v == std::nearbyint(v) && v >= -128 && v <= 127,
                         "i8 weight " << v << " is not an integer in [-128, 127]");
            dst[((q * w.kw + kw) * cPad + ch) * 4 + r] = static_cast<int8_t>(v);
          }
    return packed;
  }
  // int8 weights as the f32 integers the exact f32 sums multiply (DepthwiseWorkload).
  PackedWeights packed = allocate(taps * cPad, DType::F32, WeightLayout::DepthwiseTaps);
  float* dst = floatsOf(packed);
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t ch = 0; ch < cPad; ++ch) dst[t * cPad + ch] = ch < w.c ? src[ch * taps + t] : 0.f;
  return packed;
}

} // namespace tunec::codegen
