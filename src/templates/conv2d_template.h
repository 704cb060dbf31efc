// The conv2d template: direct convolution on channels-last (NHWC) activations through the same
// brgemm microkernel: a tile is owBlock output pixels of one row x ocBlock output channels; the
// batch-reduce runs over (kh, kw, input-channel block). Weights are pre-packed once.
#pragma once

#include "support/error.h"
#include "support/target.h"
#include "templates/isa.h"
#include "templates/knobs.h"

#include <nlohmann/json.hpp>

namespace tunec {

inline constexpr int kConv2dTemplateVersion = 1;

/// A 2-d convolution of the element types in `types`; input N x H x W x IC, weights OC x IC/groups
/// x KH x KW (ONNX order, packed at compile time), output N x OH x OW x OC. Groups split both
/// channel dimensions (depthwise convolution has its own template, which is faster for it).
struct Conv2dWorkload {
  KernelTypes types;
  int64_t n = 1, ic = 0, h = 0, w = 0, oc = 0, kh = 1, kw = 1;
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  int64_t groups = 1;
  int threads = 1;
  bool coldWeights = false; ///< weights streamed from memory, as MatmulWorkload::coldWeights
  /// The input is scaled per (image, input channel) before the convolution (squeeze-excite's
  /// channel gate, a prologue: B scaled in registers); 1x1, stride 1, no padding, one group.
  /// "channel_scale": true in the key, absent when false.
  bool channelScale = false;
  /// Pixel strides of the NHWC input and output in elements (0: dense, ic and oc): a channel
  /// slice of a wider activation read or written in place (ShuffleNet's halves, a Concat's
  /// inputs). "in_ld" / "out_ld" in the key, absent when 0. in_ld needs an unpadded input.
  int64_t inLd = 0, outLd = 0;
  /// The input is N x C x H x W (plain), reordered to NHWC as the kernel pads it (a model's
  /// image input, or its quantized u8 copy); "input_layout": "nchw" in the key, absent when
  /// false. Needs padding.
  bool nchwInput = false;
  /// int8 (u8 input): the value the padding reads, the input's zero point (a padded tap then
  /// dequantizes to 0, and the zero point's correction is the same for every output pixel);
  /// "a_zero_point" in the key, absent when 0. With a nonzero one, no tap is skipped.
  int64_t aZeroPoint = 0;

  int64_t inPixelStride() const { return inLd ? inLd : ic; }
  int64_t outPixelStride() const { return outLd ? outLd : oc; }
  /// Output rows and columns; 0 where the dilated kernel is larger than the padded input.
  int64_t oh() const { return outputSize(h + padTop + padBottom, kh, dilationH, strideH); }
  int64_t ow() const { return outputSize(w + padLeft + padRight, kw, dilationW, strideW); }
  int64_t icPerGroup() const { return ic / groups; }
  /// Input channels per group as the kernel of `isa` reads them: an int8 convolution of one
  /// group rounds them up to whole quads (an RGB image's 3 to 4), on AMX to whole 64-byte tile
  /// rows (96 to 128), the padded copy filling the extra channels with the zero point and the
  /// packed weights with zeros, so they add nothing; else icPerGroup(). The ic_block knob
  /// divides these.
  int64_t icKernelPerGroup(Isa isa = Isa::Avx512) const {
    const int64_t unit = isa == Isa::Amx ? 64 : 4;
    return isInt8Gemm(types) && groups == 1 ? (ic + unit - 1) / unit * unit : icPerGroup();
  }
  /// The kernel of `isa` reads a dense padded copy of the input: spatial padding, an NCHW input,
  /// or channels rounded up (icKernelPerGroup).
  bool copiesInput(Isa isa = Isa::Avx512) const {
    return padded() || nchwInput || icKernelPerGroup(isa) != icPerGroup();
  }
  int64_t ocPerGroup() const { return oc / groups; }
  double flops() const {
    return 2.0 * static_cast<double>(n * oc * oh() * ow() * icPerGroup() * kh * kw);
  }
  bool padded() const { return padTop || padLeft || padBottom || padRight; }
  Status check() const;
  nlohmann::json toJson() const;
  static Expected<Conv2dWorkload> fromJson(const nlohmann::json& j);
};

/// oc_oh: output-channel panels outside row blocks; oh_oc: the reverse.
enum class Conv2dLoopOrder : uint8_t { OcOh, OhOc };
/// The loop whose iterations are split across threads.
enum class Conv2dParallel : uint8_t { None, N, Oh, Oc };

template <> struct Spellings<Conv2dLoopOrder> {
  static constexpr std::pair<Conv2dLoopOrder, std::string_view> values[] = {
      {Conv2dLoopOrder::OcOh, "oc_oh"}, {Conv2dLoopOrder::OhOc, "oh_oc"}};
};
template <> struct Spellings<Conv2dParallel> {
  static constexpr std::pair<Conv2dParallel, std::string_view> values[] = {
      {Conv2dParallel::None, "none"},
      {Conv2dParallel::N, "n"},
      {Conv2dParallel::Oh, "oh"},
      {Conv2dParallel::Oc, "oc"}};
};

struct Conv2dConfig {
  Isa isa = Isa::Avx512;
  int ocBlock = 32;        ///< output channels per tile (microkernel nr)
  int owBlock = 8;         ///< output pixels of a row per tile (microkernel mr)
  int64_t icBlock = 64;    ///< input channels per brgemm batch element (divides IC)
  int64_t ohBlock = 1;     ///< output rows per block-loop iteration
  int64_t rowsPerTile = 1; ///< > 1: a tile spans this many whole output rows (ow_block = OW)
  Conv2dLoopOrder loopOrder = Conv2dLoopOrder::OcOh;
  Conv2dParallel parallel = Conv2dParallel::None;

  nlohmann::json toJson() const;
  static Expected<Conv2dConfig> fromJson(const nlohmann::json& j);
  bool operator==(const Conv2dConfig&) const = default;
};

Status validateConv2dConfig(const Conv2dWorkload& w, const Conv2dConfig& c);
/// Whether a kernel of `isa` for `w` copies only the input pixels it reads: a strided 1x1
/// convolution without padding whose input is copied anyway (rounded to bf16, or for AMX's
/// tiles). Its kernel is then subsampledWorkload(w) over that dense copy.
bool subsamplesInput(const Conv2dWorkload& w, Isa isa);
/// The 1x1 convolution of stride 1 over the pixels (y * stride_h, x * stride_w) of `w`'s input.
Conv2dWorkload subsampledWorkload(const Conv2dWorkload& w);
/// Whether the workload can run on AMX's tiles: int8 (tdpbusd) or bf16 (tdpbf16ps), one group,
/// its input channels a whole number of 64-byte tile rows (32 bf16), or for int8 at most a
/// third more when rounded up to them (96 u8 as 128, 144 as 192; not 32 as 64).
bool amxRunsConv2d(const Conv2dWorkload& w);
/// The AMX convolution's virtual row width: the padded input's width over the column stride,
/// rounded up. Virtual pixel v = oh * width + x is output pixel (oh, x) when x < ow, else a
/// padding column computed and dropped (conv2d_amx_kernel.cpp).
int64_t amxConv2dVirtualWidth(const Conv2dWorkload& w);
Conv2dConfig defaultConv2dConfig(const Conv2dWorkload& w, Isa isa, const Target& target);
KnobSpace conv2dKnobSpace(const Conv2dWorkload& w, Isa isa);
/// One value per knob of `space` (conv2dKnobSpace's knobs, set by name) to a config.
Expected<Conv2dConfig> conv2dConfigFromKnobs(const Conv2dWorkload& w, Isa isa,
                                             const KnobSpace& space,
                                             const std::vector<nlohmann::json>& values);

} // namespace tunec
