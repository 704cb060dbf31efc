// Weights packed at compile time into the layout a kernel reads: bytes, their element type and a
// layout tag, from one family of packers (one per template layout). A bf16 k-pair or an int8
// k-quad VNNI layout is a new tag and packer here, with the same bytes-plus-type shape.
#pragma once

#include "support/dtype.h"
#include "templates/conv2d_template.h"
#include "templates/depthwise_template.h"
#include "templates/matmul_template.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace tunec::codegen {

enum class WeightLayout : uint8_t {
  None,              ///< the kernel reads no packed weights
  MatmulPanels,      ///< nr-column panels of k rows: [panel][k][nr], zero past n
  MatmulPairPanels,  ///< bf16 panels of k-pairs: [panel][k/2][nr][2], zero past n and k
  Conv2dPanels,      ///< [group][panel][kh][kw][ic/g][ocBlock], zero past each group's channels
  Conv2dPairPanels,  ///< bf16: [group][panel][kh][kw][ic/g/2][ocBlock][2], input-channel pairs
  Conv2dQuadPanels,  ///< i8: [group][panel][kh][kw][ic/g/4][ocBlock][4], input-channel quads
  DepthwiseTaps,     ///< [kh*kw][c rounded up to the channel block], zero past c
  MatmulQuadPanels,  ///< i8 panels of k-quads: [panel][k/4][nr][4], zero past n and k
  DepthwiseQuadTaps, ///< i8 row quads: [kh/4][kw][c rounded up][4], zero past kh and c
};

struct PackedWeights {
  std::shared_ptr<std::byte> data; ///< 64-byte aligned
  size_t bytes = 0;
  DType dtype = DType::F32;
  WeightLayout layout = WeightLayout::None;

  bool empty() const { return bytes == 0; }
  std::span<const std::byte> view() const { return {data.get(), bytes}; }
  int64_t elements() const { return static_cast<int64_t>(bytes / dtypeSize(dtype)); }
};

/// An error naming the first weight (of `count`, integers as floats) beyond the AVX2 int8
/// kernel's 7 bits (kAvx2Int8WeightLimit) and the fixes, unless there is none; `templ` names
/// the kernel.
Status checkAvx2Int8Weights(const float* weights, int64_t count, const char* templ);

/// Elements of one batch's packed B of a matmul (n rounded up to nr, times k).
int64_t matmulPackedBElements(const MatmulWorkload& w, const MatmulConfig& c);
/// Elements of one nr-column panel of it: k (whole pairs for bf16) times nr.
int64_t matmulPanelElements(const MatmulWorkload& w, const MatmulConfig& c);

/// The packers: weights as the model stores them (f32, ONNX order; a matmul's B in its stored
/// layout, one matrix per batch unless broadcast) to the layout and element type (the
/// workload's wei) the kernel reads. For i8 weights each value is an integer in [-128, 127]
/// (the quantized weights; the compiler passes them as f32, which holds them exactly).
PackedWeights packMatmulB(const MatmulWorkload& w, const MatmulConfig& c, const float* b);
PackedWeights packConv2dWeights(const Conv2dWorkload& w, const Conv2dConfig& c, const float* src);
/// `cPad`: the channels rounded up to the kernel's channel block.
PackedWeights packDepthwiseWeights(const DepthwiseWorkload& w, const DepthwiseConfig& c,
                                   int64_t cPad, const float* src);

} // namespace tunec::codegen
