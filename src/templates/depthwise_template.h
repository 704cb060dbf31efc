// The depthwise conv2d template: one filter per channel (group = channels), NHWC, vectorized
// over channels with a block of output pixels in registers. Few knobs.
#pragma once

#include "support/error.h"
#include "support/target.h"
#include "templates/isa.h"
#include "templates/knobs.h"

#include <nlohmann/json.hpp>

namespace tunec {

inline constexpr int kDepthwiseTemplateVersion = 1;

/// Depthwise convolution of the element types in `types`: input N x H x W x C, weights C x 1 x KH x
/// KW (ONNX), output N x OH x OW x C. int8 (u8 input, s8 weights, an f32 or requantized u8
/// output): the kernel computes a window's exact integer sums, which f32 holds exactly (|x w| <=
/// 255 * 128 and kh kw of them stay below 2^24); how depends on the ISA (depthwiseSumsInQuads).
struct DepthwiseWorkload {
  KernelTypes types;
  int64_t n = 1, c = 0, h = 0, w = 0, kh = 3, kw = 3;
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  int threads = 1;
  /// int8: the value the padding reads, the input's zero point (Conv2dWorkload::aZeroPoint);
  /// "a_zero_point" in the key, absent when 0.
  int64_t aZeroPoint = 0;

  /// Output rows and columns; 0 where the dilated kernel is larger than the padded input.
  int64_t oh() const { return outputSize(h + padTop + padBottom, kh, dilationH, strideH); }
  int64_t ow() const { return outputSize(w + padLeft + padRight, kw, dilationW, strideW); }
  double flops() const { return 2.0 * static_cast<double>(n * c * oh() * ow() * kh * kw); }
  bool padded() const { return padTop || padLeft || padBottom || padRight; }
  Status check() const;
  nlohmann::json toJson() const;
  static Expected<DepthwiseWorkload> fromJson(const nlohmann::json& j);
};

/// The loop whose iterations are split across threads.
enum class DepthwiseParallel : uint8_t { None, Oh };

template <> struct Spellings<DepthwiseParallel> {
  static constexpr std::pair<DepthwiseParallel, std::string_view> values[] = {
      {DepthwiseParallel::None, "none"}, {DepthwiseParallel::Oh, "oh"}};
};

struct DepthwiseConfig {
  Isa isa = Isa::Avx512;
  int channelVectors = 2; ///< vectors of channels per tile
  int owBlock = 4;        ///< output pixels of a row per tile
  DepthwiseParallel parallel = DepthwiseParallel::None;

  nlohmann::json toJson() const;
  static Expected<DepthwiseConfig> fromJson(const nlohmann::json& j);
  bool operator==(const DepthwiseConfig&) const = default;
};

/// Whether an int8 depthwise kernel of this config sums its window in row quads with vpdpbusd
/// (AVX512-VNNI; the ISA is avx512 for int8 only where the target has VNNI, kernelIsa): each i32
/// lane holds four input rows of one channel and column, [x(kh), x(kh+1), x(kh+2), x(kh+3)],
/// against the same four taps of its filter, so a 3x3 window is three dot steps per pixel and a
/// column's quad serves every pixel whose window covers it. Else (AVX2) the u8 inputs are
/// widened to f32 and summed by the FMA, exactly. Decided here, for the packer and the emitter.
bool depthwiseSumsInQuads(const DepthwiseWorkload& w, const DepthwiseConfig& c);
/// Row quads of a window (kh rounded up to 4, over 4): the packed filter's groups.
inline int64_t depthwiseRowQuads(const DepthwiseWorkload& w) {
  return (w.kh + 3) / 4;
}

Status validateDepthwiseConfig(const DepthwiseWorkload& w, const DepthwiseConfig& c);
DepthwiseConfig defaultDepthwiseConfig(const DepthwiseWorkload& w, Isa isa);
KnobSpace depthwiseKnobSpace(const DepthwiseWorkload& w, Isa isa);
/// One value per knob of `space` (depthwiseKnobSpace's knobs, set by name) to a config.
Expected<DepthwiseConfig> depthwiseConfigFromKnobs(const DepthwiseWorkload& w, Isa isa,
                                                   const KnobSpace& space,
                                                   const std::vector<nlohmann::json>& values);

} // namespace tunec
